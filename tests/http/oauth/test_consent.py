"""The consent page at /oauth/authorize over HTTP (the browser test drives it in Chromium)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.conftest import make_settings, register
from tests.http.oauth.flow import REDIRECT, authorize_params, create_app, exchange, new_verifier, owner_user_and_app

PAGE = "/oauth/authorize"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


def cookie_header(response: Any, name: str) -> str:
    [header] = [h for h in response.headers.getlist("Set-Cookie") if h.startswith(f"{name}=")]
    return header


async def sign_in(client: Any, params: dict[str, str], user: Any) -> Any:
    page = await client.get(PAGE, query_string=params)
    token = csrf_of(await page.get_data(as_text=True))
    form = {**params, "action": "login", "csrf_token": token, "username": user.username, "password": user.password}
    return await client.post(PAGE, form=form)


async def test_sign_in_then_approve(client):
    _, user, dev = await owner_user_and_app(client)
    verifier = new_verifier()
    params = authorize_params(dev, scope="chat:read", verifier=verifier)

    page = await client.get(PAGE, query_string=params)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert (
        page.headers["X-Frame-Options"] == "DENY"
        and "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    )
    html = await page.get_data(as_text=True)
    assert 'id="login-username"' in html and 'id="approve"' not in html
    csrf_cookie = cookie_header(page, "volthub_oauth_csrf")
    assert "HttpOnly" in csrf_cookie and "SameSite=Lax" in csrf_cookie and "Path=/oauth" in csrf_cookie
    assert "Secure" not in csrf_cookie  # plain http here

    signed_in = await sign_in(client, params, user)
    assert signed_in.status_code == 303
    location = urlsplit(signed_in.headers["Location"])
    assert location.path == PAGE and {k: v[0] for k, v in parse_qs(location.query).items()} == params
    session_cookie = cookie_header(signed_in, "volthub_oauth_session")
    assert "HttpOnly" in session_cookie and "SameSite=Lax" in session_cookie and "Path=/oauth" in session_cookie

    consent = await client.get(PAGE, query_string=params)
    html = await consent.get_data(as_text=True)
    assert 'id="approve"' in html and 'data-scope="chat:read"' in html and user.username in html
    form = {**params, "action": "consent", "decision": "approve", "csrf_token": csrf_of(html)}
    decided = await client.post(PAGE, form=form)
    assert decided.status_code == 303
    location = decided.headers["Location"]
    query = parse_qs(urlsplit(location).query)
    assert location.startswith(REDIRECT + "?") and query["state"] == ["state-123"]
    assert (await exchange(client, dev, query["code"][0], verifier)).status_code == 200


async def test_deny(client):
    _, user, dev = await owner_user_and_app(client)
    params = authorize_params(dev, scope="chat:read", verifier=new_verifier())
    await sign_in(client, params, user)
    html = await (await client.get(PAGE, query_string=params)).get_data(as_text=True)
    decided = await client.post(
        PAGE, form={**params, "action": "consent", "decision": "deny", "csrf_token": csrf_of(html)}
    )
    query = parse_qs(urlsplit(decided.headers["Location"]).query)
    assert decided.status_code == 303 and query["error"] == ["access_denied"] and query["state"] == ["state-123"]
    assert "code" not in query


async def test_wrong_password_shows_the_form_again(client):
    _, user, dev = await owner_user_and_app(client)
    params = authorize_params(dev, verifier=new_verifier())
    user.password = "not the password"
    response = await sign_in(client, params, user)
    html = await response.get_data(as_text=True)
    assert response.status_code == 200 and 'id="error"' in html and 'id="login-username"' in html
    assert not any(h.startswith("volthub_oauth_session=") for h in response.headers.getlist("Set-Cookie"))


async def test_forms_without_a_valid_csrf_token_are_refused(client):
    owner, user, other = await register(client), await register(client), await register(client)
    dev = await create_app(client, owner)
    params = authorize_params(dev, verifier=new_verifier())
    page = await client.get(PAGE, query_string=params)
    login_token = csrf_of(await page.get_data(as_text=True))
    for token in ("", "0" * 64):
        form = {**params, "action": "login", "csrf_token": token, "username": user.username, "password": user.password}
        refused = await client.post(PAGE, form=form)
        assert refused.status_code == 400 and 'id="error"' in await refused.get_data(as_text=True)

    await sign_in(client, params, user)
    consent_token = csrf_of(await (await client.get(PAGE, query_string=params)).get_data(as_text=True))
    tampered = consent_token[:-1] + ("1" if consent_token.endswith("0") else "0")
    for token in ("", login_token, tampered):
        form = {**params, "action": "consent", "decision": "approve", "csrf_token": token}
        refused = await client.post(PAGE, form=form)
        assert refused.status_code == 400 and "Location" not in refused.headers

    # A token of another person's page does not carry over to this session.
    fresh = client.app.test_client()
    await sign_in(fresh, params, other)
    other_token = csrf_of(await (await fresh.get(PAGE, query_string=params)).get_data(as_text=True))
    refused = await client.post(
        PAGE, form={**params, "action": "consent", "decision": "approve", "csrf_token": other_token}
    )
    assert refused.status_code == 400


async def test_errors_that_must_not_redirect_render_a_page(client):
    owner = await register(client)
    dev = await create_app(client, owner)
    for changes in ({"client_id": "no-such-client"}, {"redirect_uri": "https://evil.example/cb"}, {"client_id": ""}):
        response = await client.get(PAGE, query_string={**authorize_params(dev), **changes})
        html = await response.get_data(as_text=True)
        assert response.status_code == 400 and "Location" not in response.headers and 'id="error"' in html
        assert response.headers["Cache-Control"] == "no-store"


async def test_other_errors_redirect_to_the_app(client):
    owner = await register(client)
    dev = await create_app(client, owner)
    response = await client.get(PAGE, query_string=authorize_params(dev, scope="chat:everything"))
    assert response.status_code == 303
    query = parse_qs(urlsplit(response.headers["Location"]).query)
    assert query["error"] == ["invalid_scope"] and query["state"] == ["state-123"]


async def test_cookies_are_secure_behind_https(sqlite_url):
    from volthub.http.app import create_app as make_app

    application = make_app(make_settings(sqlite_url, server={"public_url": "https://api.example"}))
    async with application.test_app():
        client = application.test_client()
        owner = await register(client)
        dev = await create_app(client, owner)
        page = await client.get(PAGE, query_string=authorize_params(dev, verifier=new_verifier()))
        assert "Secure" in cookie_header(page, "volthub_oauth_csrf")


async def test_page_escapes_what_the_app_controls(client):
    owner = await register(client)
    dev = await create_app(client, owner, name="<script>alert(1)</script>")
    page = await client.get(PAGE, query_string=authorize_params(dev, state='"><img src=x>', verifier=new_verifier()))
    html = await page.get_data(as_text=True)
    assert "<script>alert(1)" not in html and '"><img src=x>' not in html
    assert "&lt;script&gt;" in html
