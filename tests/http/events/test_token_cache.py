"""Verified tokens are cached (volthub.services.tokens), revocation is not: a token that
connected a Socket.IO client once, and so sits in the cache, is refused on its next connect
as soon as its grant is revoked or its app deleted, and on REST too."""

from __future__ import annotations

import httpx
import orjson
import pytest
import trio

from tests.conftest import LiveServer, make_settings, register_live, serve_app
from tests.http.events.live import WAIT, handshake, open_ws, receive
from tests.http.oauth.tokens import end_grant, issue_oauth_token
from tests.redis_support import Broker, broker

__all__ = ["broker"]  # fixture

EIO_PATH = "/ws/events"


async def _connect(server: LiveServer, nursery: trio.Nursery, token: str) -> str:
    """The Socket.IO CONNECT answer for `token` in auth: `40{...}` or `44{...}`."""
    ws = await open_ws(nursery, server.events_url, EIO_PATH)
    try:
        handshake(await receive(ws))
        await ws.send_message("40" + orjson.dumps({"token": token}).decode())
        answer = await receive(ws, skip_pings=True)
        assert isinstance(answer, str)
        return answer
    finally:
        await ws.aclose()


@pytest.mark.parametrize("how", ["revoke", "delete app"])
async def test_a_cached_token_is_refused_once_its_grant_is_gone(
    live_server: LiveServer, nursery: trio.Nursery, how: str
) -> None:
    user = await register_live(live_server.url)
    token = await issue_oauth_token(live_server.app, user.id, "chat:read")
    tokens = live_server.app.extensions["volthub"].tokens
    assert (await _connect(live_server, nursery, token)).startswith("40{")
    assert (await _connect(live_server, nursery, token)).startswith("40{")
    assert tokens._verified.get(token, tokens._clock.now()) is not None, "the token's signature is cached"
    async with httpx.AsyncClient(base_url=live_server.url, timeout=10) as http:
        auth = {"Authorization": f"Bearer {token}"}
        assert (await http.get("/api/users/me", headers=auth)).status_code == 200
        await end_grant(http, user, how)
        refused = await _connect(live_server, nursery, token)
        assert refused.startswith("44"), refused
        error = orjson.loads(refused[2:])
        assert error["data"]["code"] == "invalid_token" and "revoked" in error["message"], error
        assert (await http.get("/api/users/me", headers=auth)).status_code == 401
    # The user's own first-party token is unaffected.
    assert (await _connect(live_server, nursery, user.token)).startswith("40{")


@pytest.mark.parametrize("how", ["revoke", "delete app"])
async def test_a_grant_revoked_in_another_process_is_refused_here(
    postgres_url: str, nursery: trio.Nursery, how: str, broker: Broker
) -> None:
    """PostgreSQL, two servers on one database (two processes of a deployment): A has the
    token's signature and its grant cached; the user revokes through B; A refuses the token
    as soon as the revocation has crossed the broker, not `grant_cache_seconds` later."""
    settings = make_settings(postgres_url, oauth={"grant_cache_seconds": 60}, cluster=broker.section)
    stop = trio.Event()
    try:
        a = await serve_app(nursery, settings, stop)
        b = await serve_app(nursery, settings, stop)
        user = await register_live(a.url)
        token = await issue_oauth_token(a.app, user.id, "chat:read")
        assert (await _connect(a, nursery, token)).startswith("40{")
        async with httpx.AsyncClient(timeout=10) as http:
            await end_grant(http, user, how, base_url=b.url)
            auth = {"Authorization": f"Bearer {token}"}
            with trio.fail_after(WAIT):  # well within grant_cache_seconds
                while (await http.get(f"{a.url}/api/users/me", headers=auth)).status_code != 401:
                    await trio.sleep(0.05)
            refused = await _connect(a, nursery, token)
            assert refused.startswith("44"), refused
    finally:
        stop.set()
