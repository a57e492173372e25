"""First-party sessions: every session token is stored, listed and revocable; a revoked
session's token is refused on its next request, in this process and in every other one."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from tests.conftest import make_settings, register, register_live, serve_app
from tests.http.events.live import WAIT
from volthub.config import Settings
from volthub.hub.publisher import Event
from volthub.services.sessions import SESSION_REVOKED
from volthub.services.tokens import TokenService


@pytest.fixture
def settings(database_url: str) -> Settings:
    # A long cache: the revocation, not the cache running out, must refuse the token.
    return make_settings(database_url, oauth={"grant_cache_seconds": 60})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def sign_in(client: Any, username: str, password: str) -> str:
    response = await client.post("/api/auth/login", json={"username": username, "password": password})
    assert response.status_code == 200
    return str((await response.get_json())["token"])


async def test_sessions_are_listed_with_the_current_one_marked(client: Any) -> None:
    user = await register(client)
    second = await sign_in(client, user.username, user.password)
    response = await client.get("/api/auth/sessions", headers=bearer(second))
    assert response.status_code == 200
    items = (await response.get_json())["items"]
    assert len(items) == 2 and {item["label"] for item in items} == {"sign-in"}
    assert [item["current"] for item in items] == [True, False], "newest first, the caller's marked"
    assert all(item["createdAt"] and item["expiresAt"] for item in items)


async def test_a_revoked_session_token_is_refused_on_its_next_request(client: Any) -> None:
    user = await register(client)
    other = await sign_in(client, user.username, user.password)
    assert (await client.get("/api/users/me", headers=bearer(other))).status_code == 200  # now cached
    items = (await (await client.get("/api/auth/sessions", headers=user.headers)).get_json())["items"]
    [target] = [item["id"] for item in items if not item["current"]]
    assert (await client.delete(f"/api/auth/sessions/{target}", headers=user.headers)).status_code == 204
    refused = await client.get("/api/users/me", headers=bearer(other))
    assert refused.status_code == 401
    assert (await refused.get_json())["error"] == "invalid_token"
    assert (await client.get("/api/users/me", headers=user.headers)).status_code == 200, "the other session stands"
    again = await client.delete(f"/api/auth/sessions/{target}", headers=user.headers)
    assert again.status_code == 404


async def test_logout_revokes_the_current_session_only(client: Any) -> None:
    user = await register(client)
    other = await sign_in(client, user.username, user.password)
    assert (await client.post("/api/auth/logout", headers=user.headers)).status_code == 204
    assert (await client.get("/api/users/me", headers=user.headers)).status_code == 401
    assert (await client.post("/api/auth/logout", headers=user.headers)).status_code == 401
    items = (await (await client.get("/api/auth/sessions", headers=bearer(other))).get_json())["items"]
    assert [item["current"] for item in items] == [True]


async def test_another_users_or_an_unknown_session_is_404(client: Any) -> None:
    alice, bob = await register(client), await register(client)
    items = (await (await client.get("/api/auth/sessions", headers=bob.headers)).get_json())["items"]
    for session_id in (items[0]["id"], "no-such-session"):
        response = await client.delete(f"/api/auth/sessions/{session_id}", headers=alice.headers)
        assert response.status_code == 404
        assert (await response.get_json())["error"] == "not_found"
    assert (await client.get("/api/users/me", headers=bob.headers)).status_code == 200


async def test_a_token_from_before_sessions_stays_valid_and_cannot_log_out(app: Any, client: Any) -> None:
    user = await register(client)
    rt = app.extensions["volthub"]
    legacy, _ = TokenService(rt.tokens._secret, rt.clock, 3600).issue_session(user.id)  # no `sid` claim
    assert (await client.get("/api/users/me", headers=bearer(legacy))).status_code == 200
    response = await client.post("/api/auth/logout", headers=bearer(legacy))
    assert response.status_code == 409
    assert (await response.get_json())["error"] == "not_revocable"


async def test_session_routes_refuse_oauth_tokens(app: Any, client: Any) -> None:
    from tests.http.oauth.tokens import issue_oauth_token

    user = await register(client)
    token = await issue_oauth_token(app, user.id, "chat:read")
    for method, path in (("GET", "/api/auth/sessions"), ("POST", "/api/auth/logout")):
        response = await client.open(path, method=method, headers=bearer(token))
        assert response.status_code == 403


async def test_a_session_revoked_in_another_process_is_refused_here(postgres_url: str, nursery: trio.Nursery) -> None:
    """PostgreSQL, two servers on one database: A has the session check cached; the user
    revokes through B; A refuses the token as soon as the revocation crossed the bus relay,
    not `grant_cache_seconds` later."""
    settings = make_settings(postgres_url, oauth={"grant_cache_seconds": 60})
    stop = trio.Event()
    try:
        a = await serve_app(nursery, settings, stop)
        b = await serve_app(nursery, settings, stop)
        user = await register_live(a.url)
        async with httpx.AsyncClient(timeout=10) as http:
            login = await http.post(
                f"{a.url}/api/auth/login", json={"username": user.username, "password": user.password}
            )
            other = bearer(login.json()["token"])
            assert (await http.get(f"{a.url}/api/users/me", headers=other)).status_code == 200  # cached on A
            items = (await http.get(f"{b.url}/api/auth/sessions", headers=other)).json()["items"]
            [current] = [item["id"] for item in items if item["current"]]
            heard_on_a = trio.Event()

            def on_event(event: Event) -> None:  # runs with A's own listeners, in one go
                if event.name == SESSION_REVOKED and event.data.get("sessionId") == current:
                    heard_on_a.set()

            a.app.extensions["volthub"].bus.subscribe(on_event)
            assert (await http.post(f"{b.url}/api/auth/logout", headers=other)).status_code == 204
            with trio.fail_after(WAIT):
                await heard_on_a.wait()
            assert (await http.get(f"{a.url}/api/users/me", headers=other)).status_code == 401
            assert (await http.get(f"{b.url}/api/users/me", headers=other)).status_code == 401
            assert (await http.get(f"{a.url}/api/users/me", headers=user.headers)).status_code == 200
            assert current not in [
                i["id"] for i in (await http.get(f"{a.url}/api/auth/sessions", headers=user.headers)).json()["items"]
            ]
    finally:
        stop.set()
