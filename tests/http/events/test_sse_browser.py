"""The SSE stream in headless Chromium with a real `EventSource`.

`EventSource.onmessage` only sees unnamed messages; the stream sends each event once, named,
by default, unnamed with `?messages=unnamed`, and both with `?messages=both`. The page sends the token as a
header (Playwright's extra headers), as a browser app behind a proxy adding it would.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.conftest import LiveServer, register_live
from tests.http.oauth.test_consent_browser import CHROMIUM, CHROMIUM_ARGS, chromium  # noqa: F401  (fixture)

WATCH = """
(query) => new Promise((resolve, reject) => {
  const source = new EventSource('/api/events/stream' + query);
  window.named = []; window.unnamed = [];
  source.onmessage = (e) => window.unnamed.push({id: e.lastEventId, data: JSON.parse(e.data)});
  source.addEventListener('channel.follow', (e) => window.named.push({id: e.lastEventId, data: JSON.parse(e.data)}));
  source.addEventListener('connected', () => resolve(true));
  source.onerror = () => reject(new Error('EventSource failed'));
})
"""

SEND = """
async ([token, channelId]) => {
  for (let i = 0; i < 2; i++) {
    const r = await fetch('/api/integrations/oauth/test/events', {
      method: 'POST',
      headers: {'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'},
      body: JSON.stringify({eventType: 'follow', channelId}),
    });
    if (r.status !== 200) throw new Error('sandbox said ' + r.status);
  }
}
"""


def watch_in_browser(base: str, token: str, channel_id: str, query: str, expect: str) -> dict[str, Any]:
    """Runs in a worker thread: Playwright's sync API owns its own event loop there."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {token}"})
            page = context.new_page()
            page.goto(f"{base}/api/events/types")
            page.evaluate(WATCH, query)
            page.evaluate(SEND, [token, channel_id])
            page.wait_for_function(f"window.{expect}.length >= 2", timeout=10_000)
            page.wait_for_timeout(200)  # anything that should not come has had time to come
            return page.evaluate("({named: window.named, unnamed: window.unnamed})")
        finally:
            browser.close()


@pytest.mark.parametrize(("query", "expect"), [("?messages=unnamed", "unnamed"), ("?messages=both", "unnamed")])
async def test_eventsource_onmessage_receives_the_envelopes(
    live_server: LiveServer,
    chromium: str,  # noqa: F811
    query: str,
    expect: str,
) -> None:
    owner = await register_live(live_server.url)
    seen = await trio.to_thread.run_sync(watch_in_browser, live_server.url, owner.token, owner.id, query, expect)
    unnamed = seen["unnamed"]
    assert [m["data"]["event"] for m in unnamed] == ["channel.follow", "channel.follow"]
    assert all(m["data"]["data"]["isTest"] is True and m["id"] for m in unnamed)
    assert unnamed[0]["id"] != unnamed[1]["id"]
    if query == "?messages=unnamed":
        assert seen["named"] == []  # only the form asked for
    else:
        assert seen["named"] == unnamed  # the same envelope and id, named


@pytest.mark.parametrize("query", ["", "?messages=named"])
async def test_eventsource_gets_each_event_once_named_by_default(
    live_server: LiveServer,
    chromium: str,  # noqa: F811
    query: str,
) -> None:
    owner = await register_live(live_server.url)
    seen = await trio.to_thread.run_sync(watch_in_browser, live_server.url, owner.token, owner.id, query, "named")
    assert [m["data"]["event"] for m in seen["named"]] == ["channel.follow", "channel.follow"]
    assert seen["named"][0]["id"] != seen["named"][1]["id"]
    assert seen["unnamed"] == []
