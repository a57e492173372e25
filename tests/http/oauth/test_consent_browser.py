"""The consent page in headless Chromium (Playwright): sign in, approve, deny.

Needs Debian's `chromium` at /usr/bin/chromium (`.ci/run` installs it). Skipped locally
when it is missing; in CI (CI set) a missing browser fails the test instead.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
import trio

from volthub.protocol.oauth.pkce import s256_challenge

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# Nothing listens here: the browser's navigation to the app is intercepted and recorded.
REDIRECT = "http://127.0.0.1:9/callback"
LOGO = "https://logo.example/app.png"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PASSWORD = "correct horse battery"


@pytest.fixture
def chromium() -> str:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing; .ci/run installs Debian's chromium package")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    return CHROMIUM


@dataclass
class Landing:
    url: str
    page_text: dict[str, Any]


def drive_browser(base: str, authorize_url: str, username: str) -> tuple[Landing, Landing]:
    """Runs in a worker thread: Playwright's sync API owns its own event loop there."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.route(
                re.compile(r"^http://127\.0\.0\.1:9/"),
                lambda route: route.fulfill(status=200, body="app", content_type="text/plain"),
            )
            context.route(LOGO, lambda route: route.fulfill(status=200, body=PNG, content_type="image/png"))
            page = context.new_page()

            page.goto(authorize_url)
            page.fill("#login-username", username)
            page.fill("#login-password", PASSWORD)
            page.click("#login-submit")
            page.wait_for_selector("#approve")
            seen = {
                "app_name": page.inner_text("#app-name"),
                "reviewed": page.is_visible("#reviewed-badge"),
                "logo_width": page.eval_on_selector("#app-logo", "img => img.naturalWidth"),
                "sensitive": page.eval_on_selector_all(".scope.sensitive", "els => els.map(e => e.dataset.scope)"),
                "scopes": page.eval_on_selector_all(".scope", "els => els.map(e => e.dataset.scope)"),
                "categories": page.eval_on_selector_all("h3", "els => els.map(e => e.textContent)"),
                "signed_in": page.inner_text("#signed-in"),
            }
            page.click("#approve")
            page.wait_for_url(re.compile(r"^http://127\.0\.0\.1:9/callback"))
            approved = Landing(page.url, seen)

            # Still signed in (session cookie): straight to the consent screen, then Deny.
            page.goto(authorize_url.replace("state=first", "state=second"))
            page.wait_for_selector("#deny")
            page.click("#deny")
            page.wait_for_url(re.compile(r"^http://127\.0\.0\.1:9/callback"))
            denied = Landing(page.url, {})
        finally:
            browser.close()
    return approved, denied


async def test_consent_page_in_chromium(live_server, chromium):
    base = live_server.url
    # The browser walk can outlast the server's keep-alive timeout: pooled connections are
    # dropped long before it, or the token request could go out on one the server just closed.
    async with httpx.AsyncClient(base_url=base, limits=httpx.Limits(keepalive_expiry=1.0)) as http:
        owner = (await http.post("/api/auth/register", json={"username": "browser_owner", "password": PASSWORD})).json()
        user = (await http.post("/api/auth/register", json={"username": "browser_viewer", "password": PASSWORD})).json()
        created = await http.post(
            "/api/developer/apps",
            json={"name": "Overlay Pro", "redirectUris": [REDIRECT], "logoUrl": LOGO},
            headers={"Authorization": f"Bearer {owner['token']}"},
        )
        app = created.json()
        await _operator_review(live_server.app, app["clientId"], "chat:moderate")

        verifier = "v" * 64
        query = {
            "response_type": "code",
            "client_id": app["clientId"],
            "redirect_uri": REDIRECT,
            "scope": "chat:read chat:moderate",
            "state": "first",
            "code_challenge": s256_challenge(verifier),
            "code_challenge_method": "S256",
        }
        authorize_url = f"{base}/oauth/authorize?{urlencode(query)}"
        approved, denied = await trio.to_thread.run_sync(drive_browser, base, authorize_url, "browser_viewer")

        seen = approved.page_text
        assert seen["app_name"] == "Overlay Pro" and seen["reviewed"] is True and seen["logo_width"] == 1
        assert seen["scopes"] == ["chat:read", "chat:moderate"] and seen["sensitive"] == ["chat:moderate"]
        assert seen["categories"] == ["Chat"] and "browser_viewer" in seen["signed_in"]

        landed = parse_qs(urlsplit(approved.url).query)
        assert approved.url.startswith(REDIRECT + "?") and landed["state"] == ["first"]
        token = await http.post(
            "/api/developer/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": landed["code"][0],
                "redirect_uri": REDIRECT,
                "code_verifier": verifier,
                "client_id": app["clientId"],
                "client_secret": app["clientSecret"],
            },
        )
        assert token.status_code == 200 and token.json()["scope"] == "chat:read chat:moderate"
        me = await http.get("/api/users/me", headers={"Authorization": f"Bearer {token.json()['access_token']}"})
        assert me.json()["id"] == user["user"]["id"]

        refused = parse_qs(urlsplit(denied.url).query)
        assert refused["error"] == ["access_denied"] and refused["state"] == ["second"] and "code" not in refused


async def _operator_review(app: Any, client_id: str, scope: str) -> None:
    """What `volthub apps review` and `volthub apps grant` do."""
    from volthub.persistence import apps as apps_repo
    from volthub.persistence import oauth as oauth_repo

    def run(tx: Any) -> None:
        apps_repo.set_reviewed(tx, client_id, True, 1)
        oauth_repo.grant_app_scope(tx, client_id, scope, 1)

    await app.extensions["volthub"].db.write(run)
