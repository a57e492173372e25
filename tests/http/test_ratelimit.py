"""Rate limits through the app: 429s, headers on every response, who shares a budget.

Time is trio's MockClock without autojump: it moves only on `clock.jump`, and the app's
wall clock (TrioClock) follows it, so every X-RateLimit-Reset value is exact.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from quart import Blueprint, Quart, request
from trio.testing import MockClock

from tests.conftest import make_settings, register
from volthub.http import access
from volthub.http.app import create_app
from volthub.http.ratelimit import limited
from volthub.hub.clock import TrioClock

START = 1_700_000_000
FORM = "application/x-www-form-urlencoded"

probe = Blueprint("ratelimit_probe", __name__, url_prefix="/_ratelimit")


@probe.get("/plain")
@access.public
async def plain() -> dict[str, Any]:
    return {"ok": True}


@probe.post("/chat")
@access.token()
@limited("chat_send")
async def chat() -> dict[str, Any]:
    return {"sent": True}


@probe.post("/public-chat")
@access.public
@limited("chat_send")
async def public_chat() -> dict[str, Any]:
    return {"sent": True}


@probe.post("/apps")
@access.first_party
@limited("app_create")
async def create_app_route() -> dict[str, Any]:
    return {"created": True}


@probe.post("/token")
@access.public
@access.accepts(FORM, "application/json")
@limited("token")
async def token() -> dict[str, Any]:
    # The limiter read the body first; the view must still see it.
    form = await request.form if request.mimetype == FORM else await request.get_json()
    return {"client_id": form.get("client_id")}


@probe.get("/boom")
@access.public
async def boom() -> dict[str, Any]:
    raise RuntimeError("deliberate")


@pytest.fixture
def clock() -> MockClock:
    return MockClock()  # no autojump: time moves only when a test jumps it


@pytest.fixture
def running(sqlite_url: str, clock: MockClock) -> Any:
    @asynccontextmanager
    async def start(**ratelimit: Any) -> AsyncIterator[Any]:
        app: Quart = create_app(make_settings(sqlite_url, ratelimit=ratelimit), clock=TrioClock(start=START))
        app.register_blueprint(probe)
        async with app.test_app():
            yield app.test_client()

    return start


def at(ip: str) -> dict[str, Any]:
    return {"scope_base": {"client": (ip, 40000)}}


def limits(response: Any) -> tuple[int, int, int]:
    headers = response.headers
    return int(headers["X-RateLimit-Limit"]), int(headers["X-RateLimit-Remaining"]), int(headers["X-RateLimit-Reset"])


async def exhaust(client: Any, count: int, path: str, **kwargs: Any) -> None:
    for _ in range(count):
        response = await client.post(path, **kwargs)
        assert response.status_code == 200, await response.get_data(as_text=True)


async def test_chat_send_refuses_the_31st_with_retry_after(running: Any, clock: MockClock) -> None:
    async with running() as client:
        user = await register(client)
        first = await client.post("/_ratelimit/chat", headers=user.headers)
        assert limits(first) == (30, 29, START + 2)  # one send returns every 60 s / 30
        await exhaust(client, 29, "/_ratelimit/chat", headers=user.headers)

        refused = await client.post("/_ratelimit/chat", headers=user.headers)
        assert refused.status_code == 429
        body = await refused.get_json()
        assert body["error"] == "rate_limit_exceeded" and body["retry_after"] == 2
        assert set(body) == {"error", "message", "details", "retry_after"}
        assert body["details"] == {"retry_after": 2, "requestId": refused.headers["X-Request-Id"]}
        assert refused.headers["Retry-After"] == "2"
        assert limits(refused) == (30, 0, START + 60)

        clock.jump(1)
        again = await client.post("/_ratelimit/chat", headers=user.headers)
        assert again.status_code == 429 and again.headers["Retry-After"] == "1"
        clock.jump(1)
        assert (await client.post("/_ratelimit/chat", headers=user.headers)).status_code == 200
        assert (await client.post("/_ratelimit/chat", headers=user.headers)).status_code == 429


async def test_the_whole_budget_is_back_after_the_window(running: Any, clock: MockClock) -> None:
    async with running(chat_send_per_minute=3) as client:
        user = await register(client)
        await exhaust(client, 3, "/_ratelimit/chat", headers=user.headers)
        assert (await client.post("/_ratelimit/chat", headers=user.headers)).status_code == 429
        clock.jump(60)
        await exhaust(client, 3, "/_ratelimit/chat", headers=user.headers)
        assert (await client.post("/_ratelimit/chat", headers=user.headers)).status_code == 429


async def test_users_do_not_share_a_chat_budget(running: Any) -> None:
    async with running(chat_send_per_minute=2) as client:
        alice, bob = await register(client), await register(client)
        await exhaust(client, 2, "/_ratelimit/chat", headers=alice.headers)
        assert (await client.post("/_ratelimit/chat", headers=alice.headers)).status_code == 429
        ok = await client.post("/_ratelimit/chat", headers=bob.headers)
        assert ok.status_code == 200 and limits(ok)[:2] == (2, 1)


async def test_without_a_token_a_category_is_counted_per_ip(running: Any) -> None:
    async with running(chat_send_per_minute=2) as client:
        await exhaust(client, 2, "/_ratelimit/public-chat", **at("10.0.0.1"))
        assert (await client.post("/_ratelimit/public-chat", **at("10.0.0.1"))).status_code == 429
        assert (await client.post("/_ratelimit/public-chat", **at("10.0.0.2"))).status_code == 200


async def test_app_creation_is_counted_per_hour(running: Any, clock: MockClock) -> None:
    async with running(app_create_per_hour=2) as client:
        user = await register(client)
        await exhaust(client, 2, "/_ratelimit/apps", headers=user.headers)
        refused = await client.post("/_ratelimit/apps", headers=user.headers)
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1800"
        assert limits(refused) == (2, 0, START + 3600)
        clock.jump(1800)
        assert (await client.post("/_ratelimit/apps", headers=user.headers)).status_code == 200


async def test_global_budget_is_per_ip_and_comes_before_authentication(running: Any) -> None:
    garbage = {"Authorization": "Bearer not-a-token"}
    async with running(global_per_ip_per_minute=4) as client:
        unauthorized = await client.post("/_ratelimit/chat", headers=garbage, **at("10.0.0.1"))
        assert unauthorized.status_code == 401 and limits(unauthorized)[:2] == (4, 3)
        for _ in range(3):
            assert (await client.get("/_ratelimit/plain", **at("10.0.0.1"))).status_code == 200
        # Out of budget: a bad token is not even looked at.
        refused = await client.post("/_ratelimit/chat", headers=garbage, **at("10.0.0.1"))
        assert refused.status_code == 429 and (await refused.get_json())["error"] == "rate_limit_exceeded"
        assert (await client.get("/_ratelimit/plain", **at("10.0.0.1"))).status_code == 429
        assert (await client.get("/_ratelimit/plain", **at("10.0.0.2"))).status_code == 200


async def test_headers_on_every_kind_of_response(running: Any) -> None:
    async with running(global_per_ip_per_minute=6) as client:
        responses = {
            200: await client.get("/_ratelimit/plain"),
            404: await client.get("/_ratelimit/nowhere"),
            405: await client.delete("/_ratelimit/plain"),
            401: await client.post("/_ratelimit/chat"),
            415: await client.post("/_ratelimit/public-chat", data="x", headers={"Content-Type": "text/plain"}),
            500: await client.get("/_ratelimit/boom"),
            429: await client.get("/_ratelimit/plain"),
        }
        for status, response in responses.items():
            assert response.status_code == status
        remaining = [limits(response)[1] for response in responses.values()]
        assert remaining == [5, 4, 3, 2, 1, 0, 0]
        assert {limits(response)[0] for response in responses.values()} == {6}


async def test_headers_report_the_tightest_budget(running: Any) -> None:
    async with running(global_per_ip_per_minute=600, chat_send_per_minute=30) as client:
        user = await register(client)
        assert limits(await client.get("/_ratelimit/plain"))[0] == 600
        assert limits(await client.post("/_ratelimit/chat", headers=user.headers))[:2] == (30, 29)


async def test_token_endpoint_counts_per_client_id_and_ip(running: Any) -> None:
    basic = base64.b64encode(b"app-a:secret").decode()
    async with running(token_per_minute=2) as client:
        echoed = await client.post("/_ratelimit/token", form={"client_id": "app-a"}, **at("10.0.0.1"))
        assert (await echoed.get_json()) == {"client_id": "app-a"}
        json_ok = await client.post("/_ratelimit/token", json={"client_id": "app-a"}, **at("10.0.0.1"))
        assert json_ok.status_code == 200 and (await json_ok.get_json()) == {"client_id": "app-a"}
        # Basic auth names the same client: the same budget, now spent.
        refused = await client.post(
            "/_ratelimit/token", form={"grant_type": "x"}, headers={"Authorization": f"Basic {basic}"}, **at("10.0.0.1")
        )
        assert refused.status_code == 429
        other_client = await client.post("/_ratelimit/token", form={"client_id": "app-b"}, **at("10.0.0.1"))
        other_ip = await client.post("/_ratelimit/token", form={"client_id": "app-a"}, **at("10.0.0.2"))
        assert other_client.status_code == 200 and other_ip.status_code == 200


async def test_forwarded_for_is_ignored_unless_trusted(running: Any) -> None:
    async with running(global_per_ip_per_minute=1) as client:
        await client.get("/_ratelimit/plain", **at("10.0.0.1"))
        spoofed = await client.get("/_ratelimit/plain", headers={"X-Forwarded-For": "203.0.113.9"}, **at("10.0.0.1"))
        assert spoofed.status_code == 429


async def test_forwarded_for_last_entry_when_trusted(running: Any) -> None:
    async with running(global_per_ip_per_minute=1, trust_forwarded_for=True) as client:
        proxy = at("10.0.0.1")
        first = await client.get("/_ratelimit/plain", headers={"X-Forwarded-For": "1.1.1.1, 203.0.113.9"}, **proxy)
        # The client can forge the leading entries, not the one our proxy appends.
        forged = await client.get("/_ratelimit/plain", headers={"X-Forwarded-For": "8.8.8.8, 203.0.113.9"}, **proxy)
        other = await client.get("/_ratelimit/plain", headers={"X-Forwarded-For": "203.0.113.10"}, **proxy)
        assert [first.status_code, forged.status_code, other.status_code] == [200, 429, 200]


async def test_disabled_counts_nothing_and_sends_no_headers(running: Any) -> None:
    async with running(enabled=False, global_per_ip_per_minute=1, chat_send_per_minute=1) as client:
        user = await register(client)
        for _ in range(3):
            response = await client.post("/_ratelimit/chat", headers=user.headers)
            assert response.status_code == 200
            assert "X-RateLimit-Limit" not in response.headers
