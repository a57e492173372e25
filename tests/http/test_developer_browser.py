"""The developer dashboard walked in headless Chromium (Playwright): sign in, create an app
and a webhook against a local HTTPS receiver, send a test event, watch it in the live
inspector and in the delivery log, redeliver it; the receiver gets it twice, same event id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import trio

from tests.conftest import make_settings, register_live, serve_app
from tests.http.oauth.test_consent_browser import CHROMIUM, CHROMIUM_ARGS, chromium  # noqa: F401  (fixture)
from tests.http.test_docs_pages import only_this_origin
from tests.services.webhooks.support import WebhookReceiver, start_receiver

WAIT_MS = 15_000


def walk(base: str, username: str, password: str, receiver: WebhookReceiver) -> dict[str, Any]:
    """Runs in a worker thread: Playwright's sync API owns its own event loop there."""
    from playwright.sync_api import sync_playwright

    elsewhere: list[str] = []
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = only_this_origin(browser, base, elsewhere, problems)  # no third-party origin
            page.goto(f"{base}/developer")
            page.fill("#login-username", username)
            page.fill("#login-password", password)
            page.click("#login-submit")
            page.wait_for_selector("#whoami")

            page.fill("#create-app input[name=name]", "Walk app")
            page.fill("#create-app textarea[name=redirect_uris]", "https://app.example/callback")
            page.click("#create-app button")
            page.wait_for_selector("#app-secret")
            client_id = page.inner_text("#client-id")

            page.fill("#create-webhook input[name=url]", receiver.url())
            page.select_option("#create-webhook select[name=events]", ["channel.follow"])
            page.click("#create-webhook button")
            receiver.secret = page.inner_text("#webhook-secret")  # read by the receiver per request
            webhook_link = page.locator(".webhook a").first.get_attribute("href")

            # The dashboard: the inspector connects, then a test event goes to sockets and webhooks.
            page.goto(f"{base}/developer")
            page.wait_for_selector("#inspector-state:text('connected')", timeout=WAIT_MS)
            page.select_option("#test-event-name", "channel.follow")
            page.click("#send-test")
            page.wait_for_selector("#test-result[data-event-id]:not([data-event-id=''])", timeout=WAIT_MS)
            event_id = page.get_attribute("#test-result", "data-event-id")
            seen = page.wait_for_selector(f"#inspector-log .event[data-id='{event_id}']", timeout=WAIT_MS)
            inspected = {"event": seen.get_attribute("data-event"), "text": seen.inner_text()}

            # The delivery log: delivered once; redeliver; the log shows both.
            page.goto(f"{base}{webhook_link}")
            for _ in range(100):
                row = page.locator(f".delivery[data-event-id='{event_id}']")
                if row.count() == 1 and row.get_attribute("data-status") == "succeeded":
                    break
                page.wait_for_timeout(100)
                page.reload()
            first_row = page.inner_text(f".delivery[data-event-id='{event_id}']")
            page.click(f".delivery[data-event-id='{event_id}'] .redeliver")
            for _ in range(100):
                rows = page.locator(f".delivery[data-event-id='{event_id}'][data-status='succeeded']")
                if rows.count() == 2:
                    break
                page.wait_for_timeout(100)
                page.reload()
            log_rows = page.locator(f".delivery[data-event-id='{event_id}']").all_inner_texts()
        finally:
            browser.close()
    return {
        "client_id": client_id,
        "event_id": event_id,
        "inspected": inspected,
        "first_row": first_row,
        "log_rows": log_rows,
        "elsewhere": elsewhere,
        "problems": problems,
    }


async def test_dashboard_walk_in_chromium(
    sqlite_url: str,
    receiver_tls: tuple[Path, Path, Path],
    nursery: trio.Nursery,
    chromium: str,  # noqa: F811
) -> None:
    receiver, stop_receiver = await start_receiver(nursery, receiver_tls)
    settings = make_settings(
        sqlite_url,
        webhooks={"allow_private_targets": True, "ca_file": str(receiver_tls[0]), "poll_seconds": 0.2},
        events={"gateway_port": 0},
    )
    stop = trio.Event()
    server = await serve_app(nursery, settings, stop)
    user = await register_live(server.url)
    seen = await trio.to_thread.run_sync(walk, server.url, user.username, user.password, receiver)

    assert seen["elsewhere"] == [] and seen["problems"] == []
    assert seen["inspected"]["event"] == "channel.follow" and '"isTest":true' in seen["inspected"]["text"]
    assert "succeeded" in seen["first_row"] and "204" in seen["first_row"] and " ms" in seen["first_row"]
    assert len(seen["log_rows"]) == 2 and any("redelivery" in row for row in seen["log_rows"])
    bodies = [orjson.loads(d.body) for d in receiver.received]
    assert [b["id"] for b in bodies] == [seen["event_id"], seen["event_id"]]  # twice, the same event id
    assert all(d.verified for d in receiver.received)
    assert all(b["event"] == "channel.follow" and b["data"]["isTest"] is True for b in bodies)
    assert [d.headers["webhook-id"] for d in receiver.received] == [seen["event_id"]] * 2
    stop.set()
    stop_receiver.set()
