"""The browser guide's pages (docs/examples/browser/) in headless Chromium, each served from
an origin of its own, as an overlay or an app would be: one origin the server allows
(`[server] cors_origins`), one it does not.

From the allowed origin: the SPA finds the endpoints in the metadata, runs authorization
code + PKCE through the consent page and the token endpoint, calls the REST API, posts a
chat message and reads it back over SSE by fetch (pausing and resuming with
Last-Event-ID); the overlay connects the official Socket.IO browser client to the gateway
and to the mount and shows chat and an alert. From the refused origin every one of those
steps fails in the browser. The HTML pages are same-origin for both.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import trio

from tests.conftest import RegisteredUser, make_settings, register_live, serve_app
from tests.http.oauth.test_consent_browser import CHROMIUM, CHROMIUM_ARGS, chromium  # noqa: F401  (fixture)
from tests.js_client import JS_DIR

# A minute of Chromium: run among the first modules (tests/conftest.py).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PAGES = REPO / "docs" / "examples" / "browser"
SOCKET_IO = JS_DIR / "node_modules" / "socket.io-client" / "dist" / "socket.io.min.js"
WAIT_MS = 20_000
FAILED = "Failed to fetch"  # what Chromium's fetch rejects with when CORS refuses an answer

# Each step from a page, as the page's script sees it: "ok", an HTTP status it could read,
# or the error it got.
ATTEMPTS = """async ({server, token, userId}) => {
  const attempt = async (step) => {
    try { const response = await step(); return response.ok ? "ok" : `read ${response.status}`; }
    catch (error) { return error.message; }
  };
  const bearer = {Authorization: `Bearer ${token}`};
  const controller = new AbortController();
  const result = {
    metadata: await attempt(() => fetch(`${server}/.well-known/oauth-authorization-server`)),
    token_endpoint: await attempt(() => fetch(`${server}/api/developer/oauth/token`, {
      method: "POST", body: new URLSearchParams({grant_type: "authorization_code", code: "nope", client_id: "x"}),
    })),
    rest: await attempt(() => fetch(`${server}/api/users/me`, {headers: bearer})),
    chat_send: await attempt(() => fetch(`${server}/api/integrations/oauth/chat/channels/${userId}/messages`, {
      method: "POST", headers: {...bearer, "Content-Type": "application/json"},
      body: JSON.stringify({message: "attempted"}),
    })),
    sse: await attempt(() => fetch(`${server}/api/events/stream`, {
      headers: {...bearer, Accept: "text/event-stream", "Last-Event-ID": "0"}, signal: controller.signal,
    })),
    html_consent: await attempt(() => fetch(`${server}/oauth/authorize?client_id=x`)),
    html_dashboard: await attempt(() => fetch(`${server}/developer`)),
    html_reference: await attempt(() => fetch(`${server}/docs`)),
  };
  controller.abort();
  return result;
}"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Origins:
    allowed: str
    refused: str


@pytest.fixture
def origins(tmp_path: Path) -> Iterator[Origins]:
    """The guide's pages and the Socket.IO browser client, served by two static servers."""
    if not SOCKET_IO.is_file():
        pytest.fail("socket.io-client is not installed: run `npm ci --prefix tests/js` (make test does)")
    for source in (PAGES / "overlay.html", PAGES / "spa.html", SOCKET_IO):
        (tmp_path / source.name).symlink_to(source)
    handler = functools.partial(QuietHandler, directory=str(tmp_path))
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Origins(*(f"http://127.0.0.1:{server.server_address[1]}" for server in servers))
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


@dataclass
class Walk:
    server: str
    gateway: str
    origins: Origins
    owner: RegisteredUser
    viewer: RegisteredUser
    client_id: str

    def spa_url(self, origin: str) -> str:
        return f"{origin}/spa.html?{urlencode({'server': self.server, 'client_id': self.client_id})}"

    def overlay_url(self, origin: str, events: str) -> str:
        return f"{origin}/overlay.html#{urlencode({'events': events, 'token': self.owner.token})}"

    def post_chat(self, text: str) -> None:
        response = httpx.post(
            f"{self.server}/api/integrations/oauth/chat/channels/{self.owner.id}/messages",
            json={"message": text},
            headers=self.owner.headers,
        )
        assert response.status_code == 200, response.text

    def follow(self) -> None:
        response = httpx.post(f"{self.server}/api/users/follow/{self.owner.id}", headers=self.viewer.headers)
        assert response.status_code == 200, response.text

    def attempts(self, page: Any) -> dict[str, str]:
        """Each step of ATTEMPTS, tried from `page` with the owner's token."""
        return page.evaluate(ATTEMPTS, {"server": self.server, "token": self.owner.token, "userId": self.owner.id})

    def open_overlay(self, browser: Any, origin: str, events: str, state: str) -> Any:
        """A page of the overlay served from `origin`, its client pointed at `events`, once its
        status is `state`."""
        overlay = browser.new_page()
        overlay.goto(self.overlay_url(origin, events))
        overlay.wait_for_selector(f"#status[data-state={state}]", timeout=WAIT_MS)
        return overlay


def sign_in_through_the_spa(page: Any, walk: Walk) -> None:
    page.goto(walk.spa_url(walk.origins.allowed))
    page.click("#sign-in")
    page.wait_for_selector("#login-username", timeout=WAIT_MS)  # the consent page, on volthub's origin
    page.fill("#login-username", walk.owner.username)
    page.fill("#login-password", walk.owner.password)
    page.click("#login-submit")
    page.click("#approve", timeout=WAIT_MS)
    page.wait_for_selector("#status[data-state=signed-in]", timeout=WAIT_MS)


def from_the_allowed_origin(browser: Any, walk: Walk) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    page = browser.new_page()
    sign_in_through_the_spa(page, walk)
    seen["signed_in"] = page.inner_text("#status")
    page.wait_for_selector("#stream[data-state=connected]", timeout=WAIT_MS)
    page.fill("#chat-text", "hello from the SPA")
    page.click("#chat-send")
    page.wait_for_selector("#events li[data-event='chat.message']:has-text('hello from the SPA')", timeout=WAIT_MS)
    page.click("#pause")
    walk.post_chat("sent while paused")
    page.click("#resume")  # reconnects with Last-Event-ID: the missed message is replayed
    page.wait_for_selector("#events li:has-text('sent while paused')", timeout=WAIT_MS)
    seen["sse_messages"] = page.locator("#events li[data-event='chat.message']").all_inner_texts()
    seen["attempts"] = walk.attempts(page)

    for listener, events in (("gateway", walk.gateway), ("mount", walk.server)):
        overlay = walk.open_overlay(browser, walk.origins.allowed, events, "connected")
        walk.post_chat(f"chat seen on the {listener}")
        overlay.wait_for_selector(f"#chat li:has-text('chat seen on the {listener}')", timeout=WAIT_MS)
        seen[f"socketio_{listener}"] = overlay.inner_text("#status")
        overlay.close()
    overlay = walk.open_overlay(browser, walk.origins.allowed, walk.gateway, "connected")
    walk.follow()
    seen["alert"] = overlay.inner_text("#alerts li", timeout=WAIT_MS)
    return seen


def from_the_refused_origin(browser: Any, walk: Walk) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    page = browser.new_page()
    page.goto(walk.spa_url(walk.origins.refused))
    page.click("#sign-in")
    page.wait_for_selector("#status[data-state=error]", timeout=WAIT_MS)
    seen["sign_in"] = page.inner_text("#status")
    seen["attempts"] = walk.attempts(page)
    for listener, events in (("gateway", walk.gateway), ("mount", walk.server)):
        overlay = walk.open_overlay(browser, walk.origins.refused, events, "error")
        seen[f"socketio_{listener}"] = overlay.inner_text("#status")
        overlay.close()
    return seen


def drive(walk: Walk) -> dict[str, dict[str, Any]]:
    """Runs in a worker thread: Playwright's sync API owns its own event loop there."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            return {
                "allowed": from_the_allowed_origin(browser, walk),
                "refused": from_the_refused_origin(browser, walk),
            }
        finally:
            browser.close()


async def test_the_browser_guide_pages_work_from_an_allowed_origin_only(
    sqlite_url: str,
    nursery: trio.Nursery,
    origins: Origins,
    chromium: str,  # noqa: F811
) -> None:
    settings = make_settings(sqlite_url, server={"cors_origins": [origins.allowed]})
    stop = trio.Event()
    server = await serve_app(nursery, settings, stop)
    # The metadata names the endpoints by [server] public_url; the port is known only now.
    server.app.extensions["volthub"].settings.server.public_url = server.url
    owner, viewer = await register_live(server.url), await register_live(server.url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        created = await http.post(
            "/api/developer/apps",
            json={
                "name": "Browser guide SPA",
                "public": True,
                "redirectUris": [f"{origins.allowed}/spa.html", f"{origins.refused}/spa.html"],
            },
            headers=owner.headers,
        )
    assert created.status_code == 201, created.text
    walk = Walk(server.url, server.events_url, origins, owner, viewer, created.json()["clientId"])

    seen = await trio.to_thread.run_sync(drive, walk)
    print(json.dumps(seen, indent=2))  # what each origin saw, for the record (pytest -s)

    allowed, refused = seen["allowed"], seen["refused"]
    assert allowed["signed_in"] == f"signed in as {owner.username}"
    assert allowed["sse_messages"] == ["chat.message hello from the SPA", "chat.message sent while paused"]
    assert allowed["socketio_gateway"] == allowed["socketio_mount"] == f"connected to {owner.username}"
    assert allowed["alert"] == f"{viewer.username} followed!"
    assert allowed["attempts"] == {
        "metadata": "ok",
        "token_endpoint": "read 400",  # the browser may read the token endpoint's error
        "rest": "ok",
        "chat_send": "ok",
        "sse": "ok",
        "html_consent": FAILED,
        "html_dashboard": FAILED,
        "html_reference": FAILED,
    }
    assert refused["sign_in"] == FAILED
    assert refused["attempts"] == dict.fromkeys(allowed["attempts"], FAILED)
    assert refused["socketio_gateway"].startswith("cannot connect") and refused["socketio_mount"].startswith(
        "cannot connect"
    )
    stop.set()
