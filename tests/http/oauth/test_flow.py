"""OAuth 2.0 authorization code + PKCE through the JSON API (RFC 6749, 7636, 7009, 8414)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import RegisteredUser, make_settings, register, running_app
from tests.http.oauth.flow import (
    REDIRECT,
    DevApp,
    approve,
    authorize_params,
    bearer,
    create_app,
    exchange,
    grant_sensitive,
    new_verifier,
    oauth_tokens,
    owner_user_and_app,
    refresh,
    token_request,
)
from volthub.http.ratelimit import category_of

TOKEN = "/api/developer/oauth/token"
AUTHORIZE = "/api/developer/oauth/authorize"
REVOKE = "/api/developer/oauth/revoke"


async def assert_oauth_error(response: Any, error: str, status: int = 400) -> dict[str, Any]:
    body = await response.get_json()
    assert response.status_code == status, body
    assert body["error"] == error, body
    assert isinstance(body["message"], str) and body["message"]
    assert body["error_description"] == body["message"]
    assert response.headers["Cache-Control"] == "no-store"
    return body


# --- the happy path ------------------------------------------------------------------------------


async def test_preview_has_the_documented_shape(client):
    owner = await register(client)
    dev = await create_app(client, owner, description="Alerts", logoUrl="https://cdn.example/l.png")
    response = await client.get(
        AUTHORIZE, query_string=authorize_params(dev, scope="chat:read stream:read user:profile:read")
    )
    assert response.status_code == 200
    assert await response.get_json() == {
        "app": {
            "clientId": dev.client_id,
            "name": "Test app",
            "description": "Alerts",
            "logoUrl": "https://cdn.example/l.png",
            "reviewed": False,
        },
        "redirectUri": REDIRECT,
        "state": "state-123",
        "scopes": [
            {
                "category": "Chat",
                "scopes": [
                    {
                        "name": "chat:read",
                        "description": "Read chat messages and chat history in your channel.",
                        "sensitive": False,
                    }
                ],
            },
            {
                "category": "Stream",
                "scopes": [
                    {
                        "name": "stream:read",
                        "description": "Read your stream info and chat settings.",
                        "sensitive": False,
                    }
                ],
            },
        ],
    }


async def test_code_flow_with_s256_and_basic_auth(app, client):
    owner, user, dev = await owner_user_and_app(client)
    seen = []
    app.extensions["volthub"].bus.subscribe(seen.append)
    verifier = new_verifier()
    body = {**authorize_params(dev, scope="chat:read user:write", verifier=verifier), "approve": True}
    result = await (await client.post(AUTHORIZE, json=body, headers=user.headers)).get_json()
    assert result["code"].startswith("vhac_") and result["state"] == "state-123"
    assert parse_qs(urlsplit(result["redirectUrl"]).query) == {"code": [result["code"]], "state": ["state-123"]}
    assert result["redirectUrl"].startswith(REDIRECT + "?")

    response = await exchange(client, dev, result["code"], verifier)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    tokens = await response.get_json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600
    assert tokens["scope"] == "chat:read user:write" and tokens["refresh_token"].startswith("vhrt_")

    me = await client.get("/api/users/me", headers=bearer(tokens["access_token"]))
    assert me.status_code == 200 and (await me.get_json())["id"] == user.id
    put = await client.put("/api/users/me", json={"bio": "set by an app"}, headers=bearer(tokens["access_token"]))
    assert put.status_code == 200
    [event] = [e for e in seen if e.name == "user.authorization.grant"]
    assert event.channel_id == owner.id  # the app's owner learns who connected
    assert event.data["userId"] == user.id and event.data["username"] == user.username
    assert event.data["clientId"] == dev.client_id and event.data["appName"] == "Test app"
    assert event.data["scopes"] == ["chat:read", "user:write"] and event.data["grantedAt"]


async def test_a_token_without_the_scope_is_refused(client):
    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev, scope="chat:read")
    response = await client.put("/api/users/me", json={"bio": "x"}, headers=bearer(tokens["access_token"]))
    assert response.status_code == 403
    assert (await response.get_json())["error"] == "insufficient_scope"


async def test_json_body_with_client_secret_post(client):
    _, user, dev = await owner_user_and_app(client)
    verifier = new_verifier()
    code = await approve(client, user, dev, scope="chat:read", verifier=verifier)
    response = await client.post(
        TOKEN,
        json={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": dev.client_id,
            "client_secret": dev.client_secret,
        },
    )
    assert response.status_code == 200 and (await response.get_json())["scope"] == "chat:read"


async def test_plain_pkce_when_allowed_for_confidential_clients_only(sqlite_url):
    async with running_app(make_settings(sqlite_url, oauth={"allow_plain_pkce": True})) as (_, client):
        owner, user, dev = await owner_user_and_app(client)
        verifier = new_verifier()
        code = await approve(client, user, dev, verifier=verifier, method="plain")
        assert (await exchange(client, dev, code, verifier)).status_code == 200
        public = await create_app(client, owner, public=True)
        refused = await client.get(AUTHORIZE, query_string=authorize_params(public, verifier=verifier, method="plain"))
        body = await refused.get_json()
        assert refused.status_code == 400 and body["error"] == "invalid_request" and "public" in body["message"]


async def test_plain_pkce_is_refused_by_default(sqlite_url):
    async with running_app(make_settings(sqlite_url)) as (_, client):
        owner = await register(client)
        dev = await create_app(client, owner)
        verifier = new_verifier()
        refused = await client.get(AUTHORIZE, query_string=authorize_params(dev, verifier=verifier, method="plain"))
        body = await refused.get_json()
        assert refused.status_code == 400 and body["error"] == "invalid_request" and "S256" in body["message"]
        metadata = await (await client.get("/.well-known/oauth-authorization-server")).get_json()
        assert metadata["code_challenge_methods_supported"] == ["S256"]


async def test_confidential_client_may_skip_pkce_unless_configured(client, sqlite_url):
    _, user, dev = await owner_user_and_app(client)
    code = await approve(client, user, dev)
    assert (await exchange(client, dev, code, None)).status_code == 200

    async with running_app(make_settings(sqlite_url, oauth={"require_pkce_for_confidential": True})) as (_, other):
        owner2 = await register(other)
        dev2 = await create_app(other, owner2)
        refused = await other.get(AUTHORIZE, query_string=authorize_params(dev2))
        assert refused.status_code == 400 and "PKCE" in (await refused.get_json())["message"]


async def test_public_client_must_use_pkce_and_sends_no_secret(client):
    owner, user = await register(client), await register(client)
    dev = await create_app(client, owner, public=True)
    refused = await client.get(AUTHORIZE, query_string=authorize_params(dev))
    body = await refused.get_json()
    assert refused.status_code == 400 and body["error"] == "invalid_request" and "PKCE" in body["message"]
    assert parse_qs(urlsplit(body["redirectUrl"]).query)["error"] == ["invalid_request"]

    verifier = new_verifier()
    code = await approve(client, user, dev, verifier=verifier)
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
    with_secret = await client.post(TOKEN, form={**form, "client_id": dev.client_id, "client_secret": "guess"})
    await assert_oauth_error(with_secret, "invalid_client")
    response = await client.post(TOKEN, form={**form, "client_id": dev.client_id})
    assert response.status_code == 200
    tokens = await response.get_json()
    again = await client.post(
        TOKEN,
        form={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": dev.client_id},
    )
    assert again.status_code == 200


async def test_deny_redirects_with_access_denied(client):
    _, user, dev = await owner_user_and_app(client)
    body = {**authorize_params(dev, scope="chat:read"), "approve": False}
    response = await client.post(AUTHORIZE, json=body, headers=user.headers)
    assert response.status_code == 200
    result = await response.get_json()
    assert set(result) == {"redirectUrl"}
    query = parse_qs(urlsplit(result["redirectUrl"]).query)
    assert query["error"] == ["access_denied"] and query["state"] == ["state-123"] and "code" not in query


async def test_redirect_uri_may_be_omitted_when_one_is_registered(client):
    _, user, dev = await owner_user_and_app(client)
    verifier = new_verifier()
    code = await approve(client, user, dev, verifier=verifier, redirect_uri=None)
    form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier}
    assert (await token_request(client, dev, form)).status_code == 200


# --- refresh tokens ----------------------------------------------------------------------------


async def test_refresh_rotates_and_a_reused_token_revokes_the_grant(app, client):
    _, user, dev = await owner_user_and_app(client)
    first = await oauth_tokens(client, user, dev, scope="chat:read")
    seen = []
    app.extensions["volthub"].bus.subscribe(seen.append)

    response = await refresh(client, dev, first["refresh_token"])
    assert response.status_code == 200
    second = await response.get_json()
    assert second["refresh_token"] != first["refresh_token"] and second["scope"] == "chat:read"
    assert (await client.get("/api/users/me", headers=bearer(second["access_token"]))).status_code == 200

    reused = await refresh(client, dev, first["refresh_token"])
    await assert_oauth_error(reused, "invalid_grant")
    for token in (first["access_token"], second["access_token"]):
        assert (await client.get("/api/users/me", headers=bearer(token))).status_code == 401
    await assert_oauth_error(await refresh(client, dev, second["refresh_token"]), "invalid_grant")
    assert [e.name for e in seen] == ["user.authorization.revoke"]


async def test_refresh_can_narrow_but_not_widen(client):
    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev, scope="chat:read user:write")
    narrowed = await (await refresh(client, dev, tokens["refresh_token"], scope="chat:read")).get_json()
    assert narrowed["scope"] == "chat:read"
    put = await client.put("/api/users/me", json={"bio": "x"}, headers=bearer(narrowed["access_token"]))
    assert put.status_code == 403
    wider = await refresh(client, dev, narrowed["refresh_token"], scope="chat:read chat:write")
    await assert_oauth_error(wider, "invalid_scope")
    # The refused request did not rotate the token: the grant's full scope is still there.
    full = await (await refresh(client, dev, narrowed["refresh_token"])).get_json()
    assert full["scope"] == "chat:read user:write"


# --- replay, expiry ------------------------------------------------------------------------------


async def test_a_replayed_code_revokes_what_it_issued(client):
    _, user, dev = await owner_user_and_app(client)
    verifier = new_verifier()
    code = await approve(client, user, dev, verifier=verifier)
    tokens = await (await exchange(client, dev, code, verifier)).get_json()
    replay = await exchange(client, dev, code, verifier)
    body = await assert_oauth_error(replay, "invalid_grant")
    assert "already used" in body["message"]
    assert (await client.get("/api/users/me", headers=bearer(tokens["access_token"]))).status_code == 401
    await assert_oauth_error(await refresh(client, dev, tokens["refresh_token"]), "invalid_grant")


@pytest.fixture
async def clocked(settings, mock_clock):
    """The app on TrioClock under pytest-trio's MockClock: `mock_clock.jump` moves its time.
    (Tests also name `mock_clock` themselves: pytest-trio only installs a clock a test asks for.)"""
    from volthub.hub.clock import TrioClock

    async with running_app(settings, clock=TrioClock()) as (application, client):
        yield application, client, mock_clock


async def test_codes_expire_after_ten_minutes(clocked, mock_clock):
    _, client, clock = clocked
    _, user, dev = await owner_user_and_app(client)
    verifier = new_verifier()
    late = await approve(client, user, dev, verifier=verifier)
    in_time = await approve(client, user, dev, verifier=verifier)
    clock.jump(599)
    assert (await exchange(client, dev, in_time, verifier)).status_code == 200
    clock.jump(2)
    body = await assert_oauth_error(await exchange(client, dev, late, verifier), "invalid_grant")
    assert "expired" in body["message"]


async def test_access_tokens_expire_and_refresh_renews_them(clocked, mock_clock):
    _, client, clock = clocked
    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev)
    clock.jump(3601)
    expired = await client.get("/api/users/me", headers=bearer(tokens["access_token"]))
    assert expired.status_code == 401 and (await expired.get_json())["message"] == "token has expired"
    renewed = await (await refresh(client, dev, tokens["refresh_token"])).get_json()
    assert (await client.get("/api/users/me", headers=bearer(renewed["access_token"]))).status_code == 200


async def test_refresh_tokens_expire(clocked, mock_clock):
    _, client, clock = clocked
    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev)
    clock.jump(30 * 86400 + 1)
    body = await assert_oauth_error(await refresh(client, dev, tokens["refresh_token"]), "invalid_grant")
    assert "expired" in body["message"]


# --- every failure has its RFC 6749 code --------------------------------------------------------------


@dataclass
class Ctx:
    client: Any
    dev: DevApp
    other: DevApp
    user: RegisteredUser
    code: str
    verifier: str

    def form(self, **extra: str) -> dict[str, str]:
        base = {
            "grant_type": "authorization_code",
            "code": self.code,
            "redirect_uri": REDIRECT,
            "code_verifier": self.verifier,
        }
        return {**base, **extra}

    def basic(self, client_id: str, secret: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


@pytest.fixture
async def ctx(client) -> Ctx:
    owner, user, dev = await owner_user_and_app(client)
    other = await create_app(client, owner, name="Other")
    verifier = new_verifier()
    code = await approve(client, user, dev, scope="chat:read", verifier=verifier)
    return Ctx(client, dev, other, user, code, verifier)


def _post(c: Ctx, form: dict[str, str], headers: dict[str, str] | None = None) -> Any:
    return c.client.post(TOKEN, form=form, headers=headers or {})


TOKEN_FAILURES = {
    "unknown client": (
        lambda c: _post(c, c.form(client_id="no-such-client", client_secret="x")),
        "invalid_client",
        400,
    ),
    "unknown client, Basic": (lambda c: _post(c, c.form(), c.basic("no-such-client", "x")), "invalid_client", 401),
    "wrong secret": (
        lambda c: _post(c, c.form(client_id=c.dev.client_id, client_secret="vhcs_wrong")),
        "invalid_client",
        400,
    ),
    "wrong secret, Basic": (
        lambda c: _post(c, c.form(), c.basic(c.dev.client_id, "vhcs_wrong")),
        "invalid_client",
        401,
    ),
    "malformed Basic": (lambda c: _post(c, c.form(), {"Authorization": "Basic %%%"}), "invalid_client", 401),
    "no client authentication": (lambda c: _post(c, c.form()), "invalid_client", 400),
    "no secret for a confidential client": (
        lambda c: _post(c, c.form(client_id=c.dev.client_id)),
        "invalid_client",
        400,
    ),
    "two authentication methods": (lambda c: _post(c, c.form(client_secret="x"), c.dev.basic), "invalid_request", 400),
    "redirect mismatch": (
        lambda c: _post(c, c.form(redirect_uri="https://app.example/other"), c.dev.basic),
        "invalid_grant",
        400,
    ),
    "redirect omitted": (
        lambda c: _post(c, {k: v for k, v in c.form().items() if k != "redirect_uri"}, c.dev.basic),
        "invalid_grant",
        400,
    ),
    "bad verifier": (lambda c: _post(c, c.form(code_verifier=new_verifier()), c.dev.basic), "invalid_grant", 400),
    "malformed verifier": (lambda c: _post(c, c.form(code_verifier="short"), c.dev.basic), "invalid_grant", 400),
    "missing verifier": (
        lambda c: _post(c, {k: v for k, v in c.form().items() if k != "code_verifier"}, c.dev.basic),
        "invalid_request",
        400,
    ),
    "unknown code": (lambda c: _post(c, c.form(code="vhac_nope"), c.dev.basic), "invalid_grant", 400),
    "code of another client": (lambda c: _post(c, c.form(), c.other.basic), "invalid_grant", 400),
    "missing code": (lambda c: _post(c, {"grant_type": "authorization_code"}, c.dev.basic), "invalid_request", 400),
    "client credentials grant": (
        lambda c: _post(c, {"grant_type": "client_credentials"}, c.dev.basic),
        "unsupported_grant_type",
        400,
    ),
    "password grant": (
        lambda c: _post(c, {"grant_type": "password", "username": "a", "password": "b"}, c.dev.basic),
        "unsupported_grant_type",
        400,
    ),
    "unknown grant type": (
        lambda c: _post(c, {"grant_type": "urn:made:up"}, c.dev.basic),
        "unsupported_grant_type",
        400,
    ),
    "missing grant type": (lambda c: _post(c, {"code": c.code}, c.dev.basic), "invalid_request", 400),
    "unknown scope on refresh": (
        lambda c: _post(
            c, {"grant_type": "refresh_token", "refresh_token": "vhrt_x", "scope": "chat:everything"}, c.dev.basic
        ),
        "invalid_scope",
        400,
    ),
    "missing refresh token": (lambda c: _post(c, {"grant_type": "refresh_token"}, c.dev.basic), "invalid_request", 400),
    "unknown refresh token": (
        lambda c: _post(c, {"grant_type": "refresh_token", "refresh_token": "vhrt_x"}, c.dev.basic),
        "invalid_grant",
        400,
    ),
    "empty body": (lambda c: c.client.post(TOKEN, headers=c.dev.basic), "invalid_request", 400),
    "repeated parameter": (
        lambda c: c.client.post(
            TOKEN,
            data="grant_type=authorization_code&grant_type=refresh_token",
            headers={**c.dev.basic, "Content-Type": "application/x-www-form-urlencoded"},
        ),
        "invalid_request",
        400,
    ),
    "text body": (
        lambda c: c.client.post(TOKEN, data="grant_type=x", headers={**c.dev.basic, "Content-Type": "text/plain"}),
        "invalid_request",
        400,
    ),
    "broken JSON": (
        lambda c: c.client.post(TOKEN, data="{nope", headers={**c.dev.basic, "Content-Type": "application/json"}),
        "invalid_request",
        400,
    ),
    "JSON array": (lambda c: c.client.post(TOKEN, json=["grant_type"], headers=c.dev.basic), "invalid_request", 400),
    "JSON number": (
        lambda c: c.client.post(TOKEN, json={"grant_type": "authorization_code", "code": 5}, headers=c.dev.basic),
        "invalid_request",
        400,
    ),
}


@pytest.mark.parametrize("case", list(TOKEN_FAILURES))
async def test_token_endpoint_failures(ctx, case):
    make, error, status = TOKEN_FAILURES[case]
    response = await make(ctx)
    await assert_oauth_error(response, error, status)
    if status == 401:
        assert response.headers["WWW-Authenticate"].startswith("Basic")
    # Only a wrong verifier spends the code (one guess per code); nothing else consumed it.
    retried = await _post(ctx, ctx.form(), ctx.dev.basic)
    assert retried.status_code == (400 if case in ("bad verifier", "malformed verifier") else 200)


AUTHORIZE_FAILURES = {
    # (params changes, error, redirects back?)
    "missing client_id": ({"client_id": None}, "invalid_request", False),
    "unknown client": ({"client_id": "no-such-client"}, "invalid_client", False),
    "redirect mismatch": ({"redirect_uri": "https://app.example/callback/"}, "invalid_request", False),
    "redirect of another host": ({"redirect_uri": "https://evil.example/callback"}, "invalid_request", False),
    "missing response_type": ({"response_type": None}, "invalid_request", True),
    "token response_type": ({"response_type": "token"}, "unsupported_response_type", True),
    "unknown scope": ({"scope": "chat:read chat:everything"}, "invalid_scope", True),
    "wildcard scope": ({"scope": "chat:*"}, "invalid_scope", True),
    "ungranted sensitive scope": ({"scope": "chat:read chat:moderate"}, "invalid_scope", True),
    "bad challenge": ({"code_challenge": "too-short", "code_challenge_method": "S256"}, "invalid_request", True),
    "unknown challenge method": (
        {"code_challenge": "a" * 43, "code_challenge_method": "S512"},
        "invalid_request",
        True,
    ),
    "method without challenge": ({"code_challenge": None, "code_challenge_method": "S256"}, "invalid_request", True),
    "huge state": ({"state": "s" * 5000}, "invalid_request", True),
}


@pytest.mark.parametrize("case", list(AUTHORIZE_FAILURES))
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_authorize_failures(client, case, method):
    _, user, dev = await owner_user_and_app(client)
    changes, error, redirects_back = AUTHORIZE_FAILURES[case]
    params = authorize_params(dev, scope="chat:read", verifier=new_verifier())
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    if method == "GET":
        response = await client.get(AUTHORIZE, query_string=params)
    else:
        response = await client.post(AUTHORIZE, json={**params, "approve": True}, headers=user.headers)
    body = await response.get_json()
    assert response.status_code == 400 and body["error"] == error and body["message"], body
    assert ("redirectUrl" in body) is redirects_back
    if redirects_back:
        query = parse_qs(urlsplit(body["redirectUrl"]).query)
        assert body["redirectUrl"].startswith(REDIRECT + "?") and query["error"] == [error]
        if case != "huge state":
            assert query["state"] == ["state-123"]


async def test_unknown_scope_and_ungranted_sensitive_scope_are_named(client):
    owner = await register(client)
    dev = await create_app(client, owner)
    unknown = await (
        await client.get(AUTHORIZE, query_string=authorize_params(dev, scope="chat:everything"))
    ).get_json()
    assert "chat:everything" in unknown["message"]
    sensitive = await (
        await client.get(AUTHORIZE, query_string=authorize_params(dev, scope="stream:key streams:key:read chat:read"))
    ).get_json()
    assert sensitive["error"] == "invalid_scope" and "stream:key" in sensitive["message"]


async def test_app_without_redirect_uri_cannot_authorize(client):
    owner = await register(client)
    dev = await create_app(client, owner, redirectUris=[])
    body = await (await client.get(AUTHORIZE, query_string=authorize_params(dev, redirect_uri=None))).get_json()
    assert body["error"] == "invalid_request" and "no redirect URI" in body["message"] and "redirectUrl" not in body


async def test_completing_authorization_needs_a_first_party_token(client):
    _, user, dev = await owner_user_and_app(client)
    body = {**authorize_params(dev, verifier=new_verifier()), "approve": True}
    assert (await client.post(AUTHORIZE, json=body)).status_code == 401
    tokens = await oauth_tokens(client, user, dev)
    refused = await client.post(AUTHORIZE, json=body, headers=bearer(tokens["access_token"]))
    assert refused.status_code == 403 and (await refused.get_json())["error"] == "first_party_only"
    missing = await client.post(AUTHORIZE, json={k: v for k, v in body.items() if k != "approve"}, headers=user.headers)
    assert missing.status_code == 400 and (await missing.get_json())["error"] == "invalid_request"


# --- scopes: sensitive grants, aliases, refresh -----------------------------------------------------------


async def test_sensitive_scope_after_an_operator_grant(app, client):
    _, user, dev = await owner_user_and_app(client)
    await grant_sensitive(app, dev.client_id, "chat:moderate")
    preview = await (await client.get(AUTHORIZE, query_string=authorize_params(dev, scope="chat:moderate"))).get_json()
    assert preview["scopes"] == [
        {
            "category": "Chat",
            "scopes": [
                {
                    "name": "chat:moderate",
                    "description": "Delete messages, time out and ban people in your chat.",
                    "sensitive": True,
                }
            ],
        }
    ]
    tokens = await oauth_tokens(client, user, dev, scope="chat:moderate chat:read")
    assert tokens["scope"] == "chat:read chat:moderate"


async def test_without_review_sensitive_scopes_need_no_grant(sqlite_url):
    async with running_app(make_settings(sqlite_url, oauth={"sensitive_scopes_need_review": False})) as (_, client):
        _, user, dev = await owner_user_and_app(client)
        tokens = await oauth_tokens(client, user, dev, scope="payments:write")
        assert tokens["scope"] == "payments:write"


async def test_operator_withdrawal_applies_at_once_and_a_regrant_at_the_next_refresh(app, client):
    """As decided (volthub.services.oauth): a grant keeps the user's consent; what it
    holds follows the app's operator grants — narrowed at once, widened at the next refresh."""
    from volthub.http.access import authenticate
    from volthub.persistence import oauth as repo

    _, user, dev = await owner_user_and_app(client)
    await grant_sensitive(app, dev.client_id, "chat:moderate")
    tokens = await oauth_tokens(client, user, dev, scope="chat:read chat:moderate")
    rt = app.extensions["volthub"]

    async def scopes_of(token: str) -> frozenset[str]:
        async with app.app_context():
            return (await authenticate(token)).scopes

    assert await scopes_of(tokens["access_token"]) == {"chat:read", "chat:moderate"}
    await rt.db.write(lambda tx: repo.revoke_app_scope(tx, dev.client_id, "chat:moderate", 1))
    rt.services.oauth.invalidate_cache()  # the CLI runs in another process; servers see it within grant_cache_seconds
    assert await scopes_of(tokens["access_token"]) == {"chat:read"}
    assert await rt.db.read(lambda tx: repo.grant_has_scope(tx, user.id, dev.client_id, "chat:moderate")) is False

    narrowed = await (await refresh(client, dev, tokens["refresh_token"])).get_json()
    assert narrowed["scope"] == "chat:read"
    await grant_sensitive(app, dev.client_id, "chat:moderate")
    assert await scopes_of(narrowed["access_token"]) == {"chat:read"}  # not before the refresh
    widened = await (await refresh(client, dev, narrowed["refresh_token"])).get_json()
    assert widened["scope"] == "chat:read chat:moderate"
    assert await scopes_of(widened["access_token"]) == {"chat:read", "chat:moderate"}


async def test_legacy_aliases_are_accepted_and_keep_working(app, client):
    from volthub.http.access import authenticate
    from volthub.persistence import oauth as repo

    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev, scope="streams:read bot:read user:profile:read")
    assert tokens["scope"] == "streams:read bot:read user:profile:read"
    async with app.app_context():
        principal = await authenticate(tokens["access_token"])
    assert principal.scopes == {"stream:read", "channel:read"} and principal.allows("stream:read")
    assert not principal.allows("streams:read")  # literal checks: only real names are required
    db = app.extensions["volthub"].db
    assert await db.read(lambda tx: repo.grant_has_scope(tx, user.id, dev.client_id, "stream:read"))
    renewed = await (await refresh(client, dev, tokens["refresh_token"])).get_json()
    assert renewed["scope"] == "streams:read bot:read user:profile:read"


# --- revocation, connections, events ---------------------------------------------------------------------


async def test_revoking_a_refresh_token_revokes_its_grant(client):
    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev)
    response = await client.post(
        REVOKE, form={"token": tokens["refresh_token"], "token_type_hint": "refresh_token"}, headers=dev.basic
    )
    assert response.status_code == 200
    assert (await client.get("/api/users/me", headers=bearer(tokens["access_token"]))).status_code == 401
    await assert_oauth_error(await refresh(client, dev, tokens["refresh_token"]), "invalid_grant")


async def test_revoking_an_access_token_revokes_its_grant(client):
    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev)
    form = {"token": tokens["access_token"], "client_id": dev.client_id, "client_secret": dev.client_secret}
    assert (await client.post(REVOKE, form=form)).status_code == 200
    assert (await client.get("/api/users/me", headers=bearer(tokens["access_token"]))).status_code == 401
    await assert_oauth_error(await refresh(client, dev, tokens["refresh_token"]), "invalid_grant")
    assert (await client.post(REVOKE, form=form)).status_code == 200  # again: still 200


async def test_revocation_edge_cases(client):
    owner, user, dev = await owner_user_and_app(client)
    other = await create_app(client, owner, name="Other")
    tokens = await oauth_tokens(client, user, dev)
    for unknown in ("vhrt_unknown", "a.b.c", user.token):
        assert (await client.post(REVOKE, form={"token": unknown}, headers=dev.basic)).status_code == 200
    assert (await client.get("/api/users/me", headers=user.headers)).status_code == 200  # first-party untouched
    foreign = await client.post(REVOKE, form={"token": tokens["refresh_token"]}, headers=other.basic)
    await assert_oauth_error(foreign, "unauthorized_client")
    await assert_oauth_error(await client.post(REVOKE, form={}, headers=dev.basic), "invalid_request")
    await assert_oauth_error(
        await client.post(REVOKE, form={"token": "x", "client_id": dev.client_id, "client_secret": "no"}),
        "invalid_client",
    )
    assert (await client.get("/api/users/me", headers=bearer(tokens["access_token"]))).status_code == 200


async def test_connections_list_and_disconnect(app, client):
    owner, user = await register(client), await register(client)
    dev = await create_app(client, owner, logoUrl="https://cdn.example/l.png")
    first = await oauth_tokens(client, user, dev, scope="chat:read")
    second = await oauth_tokens(client, user, dev, scope="user:write")
    listed = await (await client.get("/api/users/me/connections", headers=user.headers)).get_json()
    [connection] = listed["items"]
    assert connection["clientId"] == dev.client_id and connection["name"] == "Test app"
    assert connection["scopes"] == ["chat:read", "user:write"] and connection["logoUrl"] == "https://cdn.example/l.png"
    assert connection["connectedAt"] and connection["reviewed"] is False
    assert (await (await client.get("/api/users/me/connections", headers=owner.headers)).get_json())["items"] == []

    seen = []
    app.extensions["volthub"].bus.subscribe(seen.append)
    gone = await client.delete(f"/api/users/me/connections/{dev.client_id}", headers=user.headers)
    assert gone.status_code == 204
    for tokens in (first, second):
        assert (await client.get("/api/users/me", headers=bearer(tokens["access_token"]))).status_code == 401
    [event] = seen
    assert event.name == "user.authorization.revoke" and event.channel_id == owner.id
    assert event.data["scopes"] == ["chat:read", "user:write"] and event.data["revokedAt"]
    again = await client.delete(f"/api/users/me/connections/{dev.client_id}", headers=user.headers)
    assert again.status_code == 404
    listed = await (await client.get("/api/users/me/connections", headers=user.headers)).get_json()
    assert listed["items"] == []


async def test_connections_are_first_party_only(client):
    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev)
    response = await client.delete(f"/api/users/me/connections/{dev.client_id}", headers=bearer(tokens["access_token"]))
    assert response.status_code == 403
    assert (await client.get("/api/users/me", headers=bearer(tokens["access_token"]))).status_code == 200


# --- discovery -------------------------------------------------------------------------------------------------


async def test_scope_catalogue(client):
    body = await (await client.get("/api/developer/oauth/scopes")).get_json()
    assert len(body["scopes"]) == 23
    assert sum(s["sensitive"] for s in body["scopes"]) == 5
    assert body["aliases"]["streams:key:read"] == "stream:key" and body["aliases"]["user:profile:read"] is None


async def test_metadata_issuer_follows_public_url_never_the_host_header(client, sqlite_url):
    metadata = await (
        await client.get("/.well-known/oauth-authorization-server", headers={"Host": "evil.example"})
    ).get_json()
    assert metadata["issuer"] == "http://127.0.0.1:8080"  # [server] host and port: no public_url set
    assert metadata["token_endpoint"] == "http://127.0.0.1:8080/api/developer/oauth/token"
    assert metadata["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert "client_credentials" not in metadata["grant_types_supported"]

    async with running_app(make_settings(sqlite_url, server={"public_url": "https://api.example/"})) as (_, other):
        body = await (await other.get("/.well-known/oauth-authorization-server")).get_json()
    assert body["issuer"] == "https://api.example"
    assert body["authorization_endpoint"] == "https://api.example/oauth/authorize"
    assert body["revocation_endpoint"] == "https://api.example/api/developer/oauth/revoke"


def test_token_endpoint_is_tagged_for_its_rate_limit():
    from volthub.http.blueprints import oauth

    assert category_of(oauth.token) == "token"


async def test_the_whole_lifecycle_on_both_backends(database_url):
    async with running_app(make_settings(database_url)) as (application, client):
        owner, user, dev = await owner_user_and_app(client)
        await grant_sensitive(application, dev.client_id, "stream:key")
        tokens = await oauth_tokens(client, user, dev, scope="chat:read streams:key:read")
        assert tokens["scope"] == "chat:read streams:key:read"
        renewed = await (await refresh(client, dev, tokens["refresh_token"])).get_json()
        await assert_oauth_error(await refresh(client, dev, tokens["refresh_token"]), "invalid_grant")
        assert (await client.get("/api/users/me", headers=bearer(renewed["access_token"]))).status_code == 401

        verifier = new_verifier()
        code = await approve(client, user, dev, verifier=verifier)
        second = await (await exchange(client, dev, code, verifier)).get_json()
        await assert_oauth_error(await exchange(client, dev, code, verifier), "invalid_grant")
        assert (await client.get("/api/users/me", headers=bearer(second["access_token"]))).status_code == 401

        third = await oauth_tokens(client, user, dev, scope="chat:read")
        listed = await (await client.get("/api/users/me/connections", headers=user.headers)).get_json()
        assert [c["scopes"] for c in listed["items"]] == [["chat:read"]]
        assert (await client.delete(f"/api/developer/apps/{dev.client_id}", headers=owner.headers)).status_code == 204
        assert (await client.get("/api/users/me", headers=bearer(third["access_token"]))).status_code == 401


async def test_concurrent_redemptions_of_one_code(database_url):
    """Exactly one exchange wins; the other counts as a replay and revokes what was issued."""
    import trio

    async with running_app(make_settings(database_url)) as (_, client):
        _, user, dev = await owner_user_and_app(client)
        verifier = new_verifier()
        code = await approve(client, user, dev, verifier=verifier)
        results: list[Any] = []

        async def redeem() -> None:
            response = await exchange(client, dev, code, verifier)
            results.append((response.status_code, await response.get_json()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(redeem)
            nursery.start_soon(redeem)
        assert sorted(status for status, _ in results) == [200, 400]
        [issued] = [body for status, body in results if status == 200]
        assert (await client.get("/api/users/me", headers=bearer(issued["access_token"]))).status_code == 401


async def test_generated_oauth_requests_never_cause_a_server_error(client):
    """Random parameters at the token, revoke and authorize endpoints: an RFC 6749 error, never a 5xx."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    _, user, dev = await owner_user_and_app(client)
    verifier = new_verifier()
    code = await approve(client, user, dev, verifier=verifier)
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)
    known = st.sampled_from(
        [
            code,
            verifier,
            REDIRECT,
            dev.client_id,
            dev.client_secret or "",
            "authorization_code",
            "refresh_token",
            "S256",
            "plain",
            "code",
            "chat:read",
            "streams:read",
        ]
    )
    keys = (
        st.sampled_from(
            [
                "grant_type",
                "code",
                "redirect_uri",
                "code_verifier",
                "refresh_token",
                "scope",
                "client_id",
                "client_secret",
                "token",
                "token_type_hint",
                "response_type",
                "state",
                "code_challenge",
                "code_challenge_method",
            ]
        )
        | text
    )
    examples: list[tuple[str, dict[str, str], str]] = []

    @settings(max_examples=200, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(
        st.sampled_from([TOKEN, REVOKE, AUTHORIZE, "/oauth/authorize"]),
        st.dictionaries(keys, known | text, max_size=8),
        st.sampled_from(["none", "basic", "garbage"]),
    )
    def collect(endpoint: str, params: dict[str, str], auth: str) -> None:
        examples.append((endpoint, params, auth))

    collect()
    rfc_codes = {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "unsupported_response_type",
    }
    for endpoint, params, auth in examples:
        headers = {"none": {}, "basic": dev.basic, "garbage": {"Authorization": "Basic !!"}}[auth]
        if endpoint in (TOKEN, REVOKE):
            response = await client.post(endpoint, form=params, headers=headers)
        else:
            response = await client.get(endpoint, query_string=params)
        assert response.status_code < 500, (endpoint, params, await response.get_data(as_text=True))
        if endpoint != "/oauth/authorize" and response.status_code >= 400:
            body = await response.get_json()
            assert body["error"] in rfc_codes and body["message"], (endpoint, params, body)


async def test_the_conftest_token_helper_is_backed_by_a_real_grant(app, client):
    from tests.http.oauth.tokens import issue_oauth_token

    user = await register(client)
    token = await issue_oauth_token(app, user.id, ["user:write", "chat:moderate", "streams:read"])
    assert (await client.put("/api/users/me", json={"bio": "x"}, headers=bearer(token))).status_code == 200
    [connection] = (await (await client.get("/api/users/me/connections", headers=user.headers)).get_json())["items"]
    assert connection["scopes"] == ["chat:moderate", "stream:read", "user:write"]
    await client.delete(f"/api/users/me/connections/{connection['clientId']}", headers=user.headers)
    assert (await client.get("/api/users/me", headers=bearer(token))).status_code == 401


async def test_nul_and_other_odd_client_ids_are_unknown_on_both_backends(database_url):
    """PostgreSQL refuses NUL in text: such values must never reach it (a 4xx, not a 500)."""
    async with running_app(make_settings(database_url)) as (_, client):
        owner = await register(client)
        dev = await create_app(client, owner)
        for odd in ("\x00", "a\x00b", "é" * 10, "x" * 300):
            preview = await client.get(AUTHORIZE, query_string={**authorize_params(dev), "client_id": odd})
            # NUL anywhere in a URL is refused before routing, for every route alike.
            expected = "invalid_request" if "\x00" in odd else "invalid_client"
            assert preview.status_code == 400 and (await preview.get_json())["error"] == expected
            token = await client.post(
                TOKEN,
                form={"grant_type": "refresh_token", "refresh_token": "x", "client_id": odd, "client_secret": "y"},
            )
            await assert_oauth_error(token, "invalid_client")
            page = await client.get("/oauth/authorize", query_string={**authorize_params(dev), "client_id": odd})
            assert page.status_code == 400
        for path in ("/api/developer/apps/%00", "/api/users/me/connections/%00"):
            method = "GET" if "apps" in path else "DELETE"
            assert (await client.open(path, method=method, headers=owner.headers)).status_code == 400
        params = authorize_params(dev, verifier=new_verifier())
        page = await client.get("/oauth/authorize", query_string=params)
        import re as _re

        csrf = _re.search(r'name="csrf_token" value="([^"]+)"', await page.get_data(as_text=True)).group(1)
        form = {
            **params,
            "action": "login",
            "csrf_token": csrf,
            "username": "a\x00b",
            "password": "whatever1",
        }
        login = await client.post("/oauth/authorize", form=form)
        assert login.status_code == 200 and 'id="error"' in await login.get_data(as_text=True)


async def test_consent_csrf_token_is_bound_to_its_authorization_request(client):
    """A CSRF token from the consent page of one authorization request does not pass on the
    form of another (another challenge here): the form is refused as expired."""
    import re as _re

    owner = await register(client)
    dev = await create_app(client, owner)
    first = authorize_params(dev, verifier=new_verifier())
    page = await client.get("/oauth/authorize", query_string=first)
    csrf = _re.search(r'name="csrf_token" value="([^"]+)"', await page.get_data(as_text=True)).group(1)
    login = {"action": "login", "csrf_token": csrf, "username": "nobody_here", "password": "wrong password"}
    other = authorize_params(dev, verifier=new_verifier())
    refused = await client.post("/oauth/authorize", form={**other, **login})
    assert refused.status_code == 400
    taken = await client.post("/oauth/authorize", form={**first, **login})
    assert taken.status_code == 200 and 'id="error"' in await taken.get_data(as_text=True)
