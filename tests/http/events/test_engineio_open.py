"""The open path both Engine.IO listeners share: `EngineIOEndpoint.decide` says what to do
with a request before the listener (the ASGI mount, or the gateway) answers it in its own I/O."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from volthub.http.events.asgi import Refusal, refusal_headers
from volthub.http.events.connection import Connection
from volthub.http.events.engineio import ORIGIN_REFUSED, EngineIOEndpoint
from volthub.http.events.gateway import Gateway, GatewayEndpoint
from volthub.http.events.gateway_connections import WireConnection
from volthub.protocol.cors import CorsPolicy
from volthub.protocol.engineio.handshake import EngineIORequest, ErrorCode, HttpError, RequestKind
from volthub.protocol.engineio.packets import decode_open
from volthub.protocol.engineio.session import Settings

ALLOWED = "https://overlay.example"
POLLING_OPEN = {"EIO": "4", "transport": "polling"}
WEBSOCKET_OPEN = {"EIO": "4", "transport": "websocket"}


class Handler:
    async def on_request(self, conn: Connection, event: Any) -> None:
        return None

    def on_leave(self, conn: Connection, event: Any) -> None:
        return None


def scope(kind: str, origin: str = ALLOWED) -> dict[str, Any]:
    return {"type": kind, "headers": [(b"origin", origin.encode())], "client": ("203.0.113.7", 4000)}


@pytest.fixture(params=["mount", "gateway"])
async def endpoint(request: pytest.FixtureRequest, nursery: trio.Nursery) -> AsyncIterator[EngineIOEndpoint]:
    """One Engine.IO path as the main port's mount serves it, or as the gateway does."""
    options: dict[str, Any] = {"cors": CorsPolicy.of([ALLOWED])}
    if request.param == "gateway":
        yield Gateway("127.0.0.1", 0).add_endpoint("/socket.io", Settings(), Handler(), **options)
        return
    mount = EngineIOEndpoint(Settings(), Handler(), **options)
    await nursery.start(mount.run)
    yield mount


@pytest.mark.parametrize(("kind", "query"), [("http", POLLING_OPEN), ("websocket", WEBSOCKET_OPEN)])
async def test_an_open_registers_a_session_of_the_listeners_kind_with_its_open_packet_queued(
    endpoint: EngineIOEndpoint, kind: str, query: dict[str, str]
) -> None:
    opened = endpoint.decide(scope(kind), "GET", query, websocket=kind == "websocket")
    assert isinstance(opened, Connection)
    assert isinstance(opened, WireConnection) == isinstance(endpoint, GatewayEndpoint)
    assert endpoint.sessions == {opened.sid: opened}
    assert opened.session.transport == query["transport"]
    assert opened.client == ("203.0.113.7", 4000)
    assert [decode_open(frame)["sid"] for frame in opened.session.outbox] == [opened.sid]


async def test_a_request_naming_a_live_session_is_handed_back_without_opening_another(
    endpoint: EngineIOEndpoint,
) -> None:
    opened = endpoint.decide(scope("http"), "GET", POLLING_OPEN, websocket=False)
    assert isinstance(opened, Connection)
    found = endpoint.decide(scope("websocket"), "GET", {**WEBSOCKET_OPEN, "sid": opened.sid}, websocket=True)
    assert found == EngineIORequest(RequestKind.UPGRADE, "websocket", opened.sid)
    assert list(endpoint.sessions) == [opened.sid]


async def test_a_protocol_error_is_refused_before_admission_is_asked(nursery: trio.Nursery) -> None:
    asked: list[dict[str, Any]] = []

    def admission(scope: dict[str, Any]) -> Refusal | None:
        asked.append(scope)
        return None

    mount = EngineIOEndpoint(Settings(), Handler(), admission=admission)
    await nursery.start(mount.run)
    refused = mount.decide(scope("http"), "GET", {"EIO": "3", "transport": "polling"}, websocket=False)
    assert isinstance(refused, HttpError) and refused.code is ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert (asked, mount.sessions) == ([], {})


async def test_a_websocket_from_a_refused_origin_opens_no_session(endpoint: EngineIOEndpoint) -> None:
    refused = endpoint.decide(scope("websocket", "https://elsewhere.example"), "GET", WEBSOCKET_OPEN, websocket=True)
    assert refused is ORIGIN_REFUSED
    assert endpoint.sessions == {}


async def test_a_polling_open_whose_origin_was_refused_opens_no_session(endpoint: EngineIOEndpoint) -> None:
    refused = endpoint.decide(scope("http"), "GET", POLLING_OPEN, websocket=False, origin_refused=True)
    assert refused is ORIGIN_REFUSED
    assert endpoint.sessions == {}


async def test_admission_refuses_an_open_with_its_own_status_and_headers(nursery: trio.Nursery) -> None:
    limited = Refusal(429, {"code": 3, "message": "Too many requests"}, {"Retry-After": "7"})
    mount = EngineIOEndpoint(Settings(), Handler(), admission=lambda scope: limited)
    await nursery.start(mount.run)
    refused = mount.decide(scope("websocket"), "GET", WEBSOCKET_OPEN, websocket=True)
    assert refused is limited
    assert refusal_headers(limited) == [(b"content-type", b"application/json"), (b"retry-after", b"7")]
    assert mount.sessions == {}


async def test_a_websocket_gone_before_its_accept_leaves_no_session_behind(nursery: trio.Nursery) -> None:
    mount = EngineIOEndpoint(Settings(), Handler())
    await nursery.start(mount.run)

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        raise OSError("the client went away")

    websocket = {**scope("websocket"), "query_string": b"EIO=4&transport=websocket"}
    with pytest.raises(OSError, match="went away"):
        await mount(websocket, receive, send)
    await wait_all_tasks_blocked()
    assert mount.sessions == {}
