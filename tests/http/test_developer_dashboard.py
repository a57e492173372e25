"""The developer dashboard's pages and forms with the Quart test client: sign-in, CSRF on
every form, one user sees nothing of another's apps, and the pages' security headers."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import make_settings, register
from volthub.config import Settings

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def settings(sqlite_url: str) -> Settings:
    return make_settings(sqlite_url, webhooks={"allow_private_targets": True})


def _token(page: str) -> str:
    found = re.search(r'name=csrf_token value="([^"]+)"', page)
    assert found, page[:500]
    return found.group(1)


class Browser:
    """One person's cookie jar on the test client (Quart's client keeps cookies)."""

    def __init__(self, app: Any) -> None:
        self.client = app.test_client()

    async def get(self, path: str) -> tuple[int, str]:
        response = await self.client.get(path, headers={"Accept": "text/html"})
        return response.status_code, await response.get_data(as_text=True)

    async def post(self, path: str, form: dict[str, Any], accept: str = "text/html") -> tuple[int, str, Any]:
        response = await self.client.post(path, form=form, headers={"Accept": accept})
        return response.status_code, await response.get_data(as_text=True), response

    async def sign_in(self, username: str, password: str) -> str:
        _, page = await self.get("/developer")
        status, _, response = await self.post(
            "/developer/login", {"username": username, "password": password, "csrf_token": _token(page)}
        )
        assert status == 303, status
        status, page = await self.get("/developer")
        assert status == 200 and f"<strong id=whoami>{username}</strong>" in page
        return _token(page)


async def _create_app(browser: Browser, token: str, name: str = "dash app") -> str:
    status, page, _ = await browser.post(
        "/developer/apps", {"name": name, "redirect_uris": "https://app.example/cb", "csrf_token": token}
    )
    assert status == 200, page
    assert 'id="app-secret"' in page
    found = re.search(r"<code id=client-id>([^<]+)</code>", page)
    assert found
    return found.group(1)


async def test_sign_in_shows_the_dashboard_and_wrong_passwords_do_not(app: Any, client: Any) -> None:
    user = await register(client)
    browser = Browser(app)
    status, page = await browser.get("/developer")
    assert status == 200 and 'id="login-form"' in page
    csp = (await browser.client.get("/developer")).headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp and "default-src 'none'" in csp
    status, page, _ = await browser.post(
        "/developer/login", {"username": user.username, "password": "wrong password", "csrf_token": _token(page)}
    )
    assert status == 400 and "Wrong username or password" in page
    await browser.sign_in(user.username, user.password)


async def test_every_form_refuses_a_missing_or_wrong_csrf_token(app: Any, client: Any) -> None:
    user = await register(client)
    browser = Browser(app)
    _, page = await browser.get("/developer")
    status, _, _ = await browser.post("/developer/login", {"username": user.username, "password": user.password})
    assert status == 403  # sign-in too
    token = await browser.sign_in(user.username, user.password)
    client_id = await _create_app(browser, token)
    status, page, _ = await browser.post(
        f"/developer/apps/{client_id}/webhooks",
        {"url": "https://127.0.0.1:9/hook", "events": "channel.follow", "csrf_token": token},
    )
    assert status == 200, page
    webhook_id = re.search(r'class=webhook data-webhook-id="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    forms = {
        "/developer/logout": {},
        "/developer/apps": {"name": "forged"},
        f"/developer/apps/{client_id}": {"name": "forged", "redirect_uris": ""},
        f"/developer/apps/{client_id}/rotate-secret": {},
        f"/developer/apps/{client_id}/webhooks": {"url": "https://127.0.0.1:9/x", "events": "channel.follow"},
        f"/developer/apps/{client_id}/webhooks/{webhook_id}/enabled": {"enabled": "false"},
        f"/developer/apps/{client_id}/webhooks/{webhook_id}/rotate-secret": {},
        f"/developer/apps/{client_id}/webhooks/{webhook_id}/deliveries/{webhook_id}/redeliver": {},
        "/developer/test-event": {"event": "channel.follow", "sockets": "1"},
    }
    before = await browser.get(f"/developer/apps/{client_id}")
    for path, form in forms.items():
        for sent in ({}, {"csrf_token": "0" * 64}):
            status, page, _ = await browser.post(path, {**form, **sent})
            assert status == 403, (path, sent, status)
            assert "This form has expired" in page
    after = await browser.get(f"/developer/apps/{client_id}")
    assert after == before  # nothing changed: same name, same webhooks, still signed in
    _, home = await browser.get("/developer")
    assert "forged" not in home


async def test_a_second_user_sees_nothing_of_the_first_users_apps(app: Any, client: Any) -> None:
    first, second = await register(client), await register(client)
    alice, bob = Browser(app), Browser(app)
    alice_token = await alice.sign_in(first.username, first.password)
    client_id = await _create_app(alice, alice_token, "alice's secret app")
    status, page, _ = await alice.post(
        f"/developer/apps/{client_id}/webhooks",
        {"url": "https://127.0.0.1:9/hook", "events": "channel.follow", "csrf_token": alice_token},
    )
    webhook_id = re.search(r'class=webhook data-webhook-id="([^"]+)"', page).group(1)  # type: ignore[union-attr]

    bob_token = await bob.sign_in(second.username, second.password)
    _, home = await bob.get("/developer")
    assert "alice's secret app" not in home and client_id not in home
    for path in (f"/developer/apps/{client_id}", f"/developer/apps/{client_id}/webhooks/{webhook_id}"):
        status, page = await bob.get(path)
        assert status == 404 and client_id not in page.replace(path, ""), path
    for path, form in {
        f"/developer/apps/{client_id}": {"name": "taken over", "redirect_uris": ""},
        f"/developer/apps/{client_id}/rotate-secret": {},
        f"/developer/apps/{client_id}/webhooks": {"url": "https://127.0.0.1:9/x", "events": "channel.follow"},
        f"/developer/apps/{client_id}/webhooks/{webhook_id}/enabled": {"enabled": "false"},
        f"/developer/apps/{client_id}/webhooks/{webhook_id}/rotate-secret": {},
    }.items():
        status, page, _ = await bob.post(path, {**form, "csrf_token": bob_token})
        assert status == 404, (path, status, page[:300])
    # Alice's token is bound to Alice: Bob's session cannot use it either.
    status, _, _ = await bob.post(f"/developer/apps/{client_id}/rotate-secret", {"csrf_token": alice_token})
    assert status == 403
    _, page = await alice.get(f"/developer/apps/{client_id}")
    assert "alice&#x27;s secret app" in page and "enabled" in page


async def test_the_pages_need_a_session(app: Any) -> None:
    browser = Browser(app)
    status, page = await browser.get("/developer/apps/nope")
    assert status == 303 or 'id="login-form"' in page
    response = await browser.client.get("/developer/events")
    assert response.status_code == 303 and response.headers["Location"] == "/developer"
    status, _, _ = await browser.post("/developer/apps", {"name": "x"})
    assert status == 303  # to the sign-in page


async def test_test_event_form_answers_json_to_the_page_script(app: Any, client: Any, published: list[Any]) -> None:
    user = await register(client)
    browser = Browser(app)
    token = await browser.sign_in(user.username, user.password)
    status, body, response = await browser.post(
        "/developer/test-event",
        {"event": "raid", "sockets": "1", "fields": "viewers=5", "csrf_token": token},
        "application/json",
    )
    assert status == 200, body
    answer = await response.get_json()
    [event] = [e for e in published if e.is_test]
    assert answer == {"eventId": event.id, "event": "channel.raid"} and event.data["viewers"] == 5
    status, body, _ = await browser.post(
        "/developer/test-event", {"event": "nope", "sockets": "1", "csrf_token": token}, "application/json"
    )
    assert status == 400 and "eventType" in body
