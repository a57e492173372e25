"""The conformance mode over real HTTP and WebSocket (server started in-process).

Scenarios follow the Engine.IO v4 and Socket.IO v5 protocol documents and the cases of
the official test-suites (socketio/engine.io-protocol and socketio/socket.io-protocol,
test-suite/): handshake fields, heartbeat, upgrade, close, namespaces, acks, binary
attachments and invalid packets. pingInterval 300 ms, pingTimeout 200 ms.

The server runs in the test's own Trio run, so `wait_all_tasks_blocked()` means "the server
has done everything it can with what we sent", and a test that takes `mock_clock` moves the
server's timers with `mock_clock.jump` (with `autojump_clock`, each wait for a ping skips ahead).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import orjson
import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked
from trio_websocket import WebSocketConnection

from tests.http.events.live import closed, handshake, open_ws, poll, polling_open, push, receive, ws_refusal
from volthub.tools import conformance

EIO = "/engine.io/"
SIO = "/socket.io/"


@pytest.fixture(params=["mount", "gateway"])
async def server(nursery: trio.Nursery, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The reference apps on Hypercorn (as the product's single-port mount) or on the gateway."""
    stop = trio.Event()
    gateway = request.param == "gateway"
    bound = await nursery.start(
        lambda task_status: conformance.serve(["127.0.0.1:0"], shutdown=stop, gateway=gateway, task_status=task_status)
    )
    yield bound[0]
    stop.set()


@pytest.fixture
async def http(server: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server, timeout=5) as client:
        yield client


# ====================================================================== Engine.IO


@pytest.mark.parametrize("path", [EIO, SIO])
async def test_polling_handshake_fields(http: httpx.AsyncClient, path: str) -> None:
    response = await http.get(path, params={"EIO": "4", "transport": "polling"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    value = handshake(response.text)
    assert set(value) == {"sid", "upgrades", "pingInterval", "pingTimeout", "maxPayload"}
    assert isinstance(value["sid"], str) and value["sid"]
    assert value["upgrades"] == ["websocket"]
    assert (value["pingInterval"], value["pingTimeout"], value["maxPayload"]) == (300, 200, 1_000_000)


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("transport=polling", 5),
        ("EIO=abc&transport=polling", 5),
        ("EIO=3&transport=polling", 5),
        ("EIO=4", 0),
        ("EIO=4&transport=abc", 0),
        ("EIO=4&transport=polling&sid=unknown-sid", 1),
    ],
)
async def test_bad_handshake_is_400_with_the_error_body(http: httpx.AsyncClient, query: str, code: int) -> None:
    response = await http.get(f"{EIO}?{query}")
    assert response.status_code == 400
    assert response.json()["code"] == code


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
async def test_handshake_with_a_bad_method_is_400(http: httpx.AsyncClient, method: str) -> None:
    response = await http.request(method, EIO, params={"EIO": "4", "transport": "polling"})
    assert response.status_code == 400
    assert response.json() == {"code": 2, "message": "Bad handshake method"}


async def test_cors_allows_any_origin(http: httpx.AsyncClient) -> None:
    preflight = await http.options(
        EIO,
        headers={
            "Origin": "https://example.org",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    response = await http.get(EIO, params={"EIO": "4", "transport": "polling"}, headers={"Origin": "https://x.test"})
    assert response.headers["access-control-allow-origin"] == "*"


async def test_websocket_handshake_offers_no_upgrade(server: str, nursery: trio.Nursery) -> None:
    ws = await open_ws(nursery, server, EIO)
    value = handshake(await receive(ws))
    assert value["upgrades"] == [] and value["pingInterval"] == 300
    await ws.aclose()


@pytest.mark.parametrize("query", [{"EIO": "abc"}, {"EIO": "3"}, {"transport": "abc"}, {"transport": "polling"}])
async def test_bad_websocket_handshake_is_refused(server: str, query: dict[str, str]) -> None:
    status, body = await ws_refusal(server, EIO, **query)
    assert status == 400 and body is not None and "code" in orjson.loads(body)


async def test_polling_messages_echo_text_and_binary(http: httpx.AsyncClient) -> None:
    sid = await polling_open(http, EIO)
    for body in ["4hello", "4test1\x1e4test2\x1e4test3", "4hello\x1ebAQIDBA=="]:
        pushed = await push(http, EIO, sid, body)
        assert (pushed.status_code, pushed.text) == (200, "ok")
        polled = await poll(http, EIO, sid)
        assert (polled.status_code, polled.text) == (200, body)


@asynccontextmanager
async def parked_poll(http: httpx.AsyncClient, sid: str) -> AsyncIterator[list[httpx.Response]]:
    """A GET poll parked in the server while the block runs; its response is in the list after."""
    answered: list[httpx.Response] = []

    async def pending() -> None:
        answered.append(await poll(http, EIO, sid))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pending)
        await wait_all_tasks_blocked()  # the GET is parked in the server (same Trio run)
        yield answered


async def test_polling_invalid_packet_closes_the_session(http: httpx.AsyncClient) -> None:
    sid = await polling_open(http, EIO)
    assert (await push(http, EIO, sid, "abc")).status_code == 400
    assert (await poll(http, EIO, sid)).status_code == 400


async def test_duplicate_polls_close_the_session(http: httpx.AsyncClient) -> None:
    sid = await polling_open(http, EIO)
    async with parked_poll(http, sid) as first:
        second = await poll(http, EIO, sid)
    assert (first[0].status_code, first[0].text) == (200, "1")  # CLOSE
    assert second.status_code == 400
    assert (await poll(http, EIO, sid)).status_code == 400


async def test_octet_stream_posts_are_refused(http: httpx.AsyncClient) -> None:
    sid = await polling_open(http, EIO)
    response = await http.post(
        EIO,
        params={"EIO": "4", "transport": "polling", "sid": sid},
        content=b"4hi",
        headers={"Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 400


async def test_oversized_polling_post_is_413_and_closes(http: httpx.AsyncClient) -> None:
    sid = await polling_open(http, EIO)
    response = await push(http, EIO, sid, "4" + "x" * 1_000_001)
    assert response.status_code == 413
    assert (await poll(http, EIO, sid)).status_code == 400


async def test_websocket_echoes_text_and_binary(server: str, nursery: trio.Nursery) -> None:
    ws = await open_ws(nursery, server, EIO)
    handshake(await receive(ws))
    await ws.send_message("4hello")
    assert await receive(ws, skip_pings=True) == "4hello"
    await ws.send_message(bytes([1, 2, 3, 4]))
    assert await receive(ws, skip_pings=True) == bytes([1, 2, 3, 4])
    await ws.aclose()


@pytest.mark.parametrize("frame", ["abc", "", "4" + "x" * 1_000_001, "0", "5"])
async def test_websocket_invalid_packet_closes(server: str, nursery: trio.Nursery, frame: str) -> None:
    ws = await open_ws(nursery, server, EIO)
    handshake(await receive(ws))
    await ws.send_message(frame)
    assert await closed(ws)
    if len(frame) > 1_000_000:
        assert ws.closed is not None and ws.closed.code == 1009


async def test_polling_heartbeat(http: httpx.AsyncClient, autojump_clock: MockClock) -> None:
    sid = await polling_open(http, EIO)
    for _ in range(3):
        polled = await poll(http, EIO, sid)
        assert (polled.status_code, polled.text) == (200, "2")
        assert (await push(http, EIO, sid, "3")).status_code == 200


async def test_polling_ping_timeout_closes(http: httpx.AsyncClient, mock_clock: MockClock) -> None:
    sid = await polling_open(http, EIO)
    for seconds in (0.3, 0.2 + 0.001):  # pingInterval: the PING is queued; pingTimeout without PONG: closed
        mock_clock.jump(seconds)
        await wait_all_tasks_blocked()
    assert (await poll(http, EIO, sid)).status_code == 400


async def test_websocket_heartbeat(server: str, nursery: trio.Nursery, autojump_clock: MockClock) -> None:
    ws = await open_ws(nursery, server, EIO)
    handshake(await receive(ws))
    for _ in range(3):
        assert await receive(ws) == "2"
        await ws.send_message("3")
    await ws.aclose()


async def test_websocket_ping_timeout_closes(server: str, nursery: trio.Nursery, autojump_clock: MockClock) -> None:
    ws = await open_ws(nursery, server, EIO)
    handshake(await receive(ws))
    assert await closed(ws)  # never answered the ping


async def test_polling_close_releases_the_pending_poll(http: httpx.AsyncClient) -> None:
    sid = await polling_open(http, EIO)
    async with parked_poll(http, sid) as pending:
        assert (await push(http, EIO, sid, "1")).status_code == 200
    assert (pending[0].status_code, pending[0].text) == (200, "6")
    assert (await poll(http, EIO, sid)).status_code == 400


async def test_websocket_close_packet_closes(server: str, nursery: trio.Nursery) -> None:
    ws = await open_ws(nursery, server, EIO)
    handshake(await receive(ws))
    await ws.send_message("1")
    assert await closed(ws)


async def test_upgrade_from_polling(http: httpx.AsyncClient, server: str, nursery: trio.Nursery) -> None:
    sid = await polling_open(http, EIO)
    ws = await open_ws(nursery, server, EIO, sid=sid)
    await ws.send_message("2probe")
    assert await receive(ws) == "3probe"
    polled = await poll(http, EIO, sid)
    assert (polled.status_code, polled.text) == (200, "6")  # NOOP ends the poll cleanly
    await ws.send_message("5")
    await ws.send_message("4hello")
    assert await receive(ws, skip_pings=True) == "4hello"
    # After the upgrade, polling is refused and a second WebSocket with that sid is closed.
    assert (await poll(http, EIO, sid)).status_code == 400
    second = await open_ws(nursery, server, EIO, sid=sid)
    assert await closed(second)
    await ws.send_message("4still here")
    assert await receive(ws, skip_pings=True) == "4still here"
    await ws.aclose()


# The official suites' upgrade cases: the client sends "2probe" and "5" without waiting for
# "3probe", then polls or opens another WebSocket with the same sid at once. Those frames may
# still be on their way through the server when the second request arrives; it must still
# be answered as the upgraded session's (400 / closed) while the upgraded socket works on.


async def hasty_upgrade(
    http: httpx.AsyncClient, server: str, nursery: trio.Nursery, path: str
) -> tuple[str, WebSocketConnection]:
    """A polling session, and a WebSocket that upgrades it without waiting for "3probe"."""
    sid = await polling_open(http, path)
    ws = await open_ws(nursery, server, path, sid=sid)
    await ws.send_message("2probe")
    await ws.send_message("5")
    return sid, ws


async def assert_the_upgraded_socket_works_on(ws: WebSocketConnection, path: str) -> None:
    """Its probe is answered, then a message is echoed (Engine.IO) or a namespace joined (Socket.IO)."""
    assert await receive(ws) == "3probe"
    if path == EIO:
        await ws.send_message("4hello")
        assert await receive(ws, skip_pings=True) == "4hello"
    else:
        await ws.send_message("40")
        assert (await receive(ws, skip_pings=True)).startswith("40")
    await ws.aclose()


@pytest.mark.parametrize("path", [EIO, SIO])
async def test_polling_right_after_a_hasty_upgrade_is_400(
    http: httpx.AsyncClient, server: str, nursery: trio.Nursery, path: str
) -> None:
    sid, ws = await hasty_upgrade(http, server, nursery, path)
    assert (await poll(http, path, sid)).status_code == 400
    await assert_the_upgraded_socket_works_on(ws, path)


@pytest.mark.parametrize("path", [EIO, SIO])
async def test_second_websocket_right_after_a_hasty_upgrade_is_closed(
    http: httpx.AsyncClient, server: str, nursery: trio.Nursery, path: str
) -> None:
    sid, ws = await hasty_upgrade(http, server, nursery, path)
    assert await closed(await open_ws(nursery, server, path, sid=sid))
    await assert_the_upgraded_socket_works_on(ws, path)


async def test_second_websocket_while_probing_is_closed_and_the_probe_goes_on(
    http: httpx.AsyncClient, server: str, nursery: trio.Nursery
) -> None:
    sid = await polling_open(http, EIO)
    ws = await open_ws(nursery, server, EIO, sid=sid)
    await ws.send_message("2probe")
    assert await receive(ws) == "3probe"
    second = await open_ws(nursery, server, EIO, sid=sid)
    assert await closed(second)
    await ws.send_message("5")
    await ws.send_message("4hello")
    assert await receive(ws, skip_pings=True) == "4hello"
    await ws.aclose()


async def test_pending_poll_during_upgrade_gets_noop(
    http: httpx.AsyncClient, server: str, nursery: trio.Nursery
) -> None:
    sid = await polling_open(http, EIO)
    async with parked_poll(http, sid) as pending:
        ws = await open_ws(nursery, server, EIO, sid=sid)
        await ws.send_message("2probe")
        assert await receive(ws) == "3probe"
    assert pending[0].text == "6"
    await ws.send_message("5")
    await ws.send_message("4up")
    assert await receive(ws, skip_pings=True) == "4up"
    await ws.aclose()


async def test_a_bad_probe_leaves_polling_working(http: httpx.AsyncClient, server: str, nursery: trio.Nursery) -> None:
    sid = await polling_open(http, EIO)
    ws = await open_ws(nursery, server, EIO, sid=sid)
    await ws.send_message("4not a probe")
    assert await closed(ws)
    assert (await push(http, EIO, sid, "4after")).text == "ok"
    assert (await poll(http, EIO, sid)).text == "4after"


# ====================================================================== Socket.IO


async def sio_connect(server: str, nursery: trio.Nursery, connect: str = "40") -> tuple[object, str]:
    ws = await open_ws(nursery, server, SIO)
    handshake(await receive(ws))
    await ws.send_message(connect)
    ack = await receive(ws, skip_pings=True)
    return ws, ack


async def sio_joined(server: str, nursery: trio.Nursery) -> WebSocketConnection:
    """A Socket.IO connection joined to the main namespace, its CONNECT answer and auth event read."""
    ws = await open_ws(nursery, server, SIO)
    handshake(await receive(ws))
    await ws.send_message("40")
    await receive(ws, skip_pings=True)  # the CONNECT answer
    await receive(ws, skip_pings=True)  # the auth event
    return ws


@pytest.mark.parametrize(
    ("connect", "prefix", "auth"),
    [
        ("40", "40", "{}"),
        ('40{"token":"123"}', "40", '{"token":"123"}'),
        ("40/custom,", "40/custom,", "{}"),
        ("40/custom", "40/custom,", "{}"),
        ('40/custom,{"token":"abc"}', "40/custom,", '{"token":"abc"}'),
    ],
)
async def test_connect_ack_then_auth_event(
    server: str, nursery: trio.Nursery, connect: str, prefix: str, auth: str
) -> None:
    ws, ack = await sio_connect(server, nursery, connect)
    assert isinstance(ack, str) and ack.startswith(prefix)
    assert set(orjson.loads(ack[len(prefix) :])) == {"sid"}
    namespace = prefix[2:]
    assert await receive(ws, skip_pings=True) == f'42{namespace}["auth",{auth}]'


async def test_unknown_namespace_gets_connect_error(server: str, nursery: trio.Nursery) -> None:
    ws, reply = await sio_connect(server, nursery, "40/random")
    assert reply == '44/random,{"message":"Invalid namespace"}'


@pytest.mark.parametrize("frame", ["4abc", "42{}", '42abc["message-with-ack",1]', '42["message"'])
async def test_invalid_packets_close_the_connection(server: str, nursery: trio.Nursery, frame: str) -> None:
    if frame == "4abc":
        ws = await open_ws(nursery, server, SIO)
        handshake(await receive(ws))
    else:
        ws = await sio_joined(server, nursery)
    await ws.send_message(frame)
    assert await closed(ws)


async def test_no_connect_packet_closes(server: str, nursery: trio.Nursery, autojump_clock: MockClock) -> None:
    ws = await open_ws(nursery, server, SIO)
    handshake(await receive(ws))
    assert await closed(ws)


async def test_disconnect_main_namespace_keeps_the_connection(server: str, nursery: trio.Nursery) -> None:
    ws = await sio_joined(server, nursery)
    await ws.send_message("41")
    assert await receive(ws) == "2"  # still open: the next thing is a ping


async def test_custom_namespace_connect_then_disconnect(server: str, nursery: trio.Nursery) -> None:
    ws = await sio_joined(server, nursery)
    await ws.send_message("40/custom")
    assert (await receive(ws, skip_pings=True)).startswith("40/custom,")
    assert await receive(ws, skip_pings=True) == '42/custom,["auth",{}]'
    await ws.send_message("41/custom")
    await ws.send_message('42["message","message to main namespace"]')
    assert await receive(ws, skip_pings=True) == '42["message-back","message to main namespace"]'


async def test_message_and_ack(server: str, nursery: trio.Nursery) -> None:
    ws = await sio_joined(server, nursery)
    await ws.send_message('42["message",1,"2",{"3":[true]}]')
    assert await receive(ws, skip_pings=True) == '42["message-back",1,"2",{"3":[true]}]'
    await ws.send_message('42456["message-with-ack",1,"2",{"3":[false]}]')
    assert await receive(ws, skip_pings=True) == '43456[1,"2",{"3":[false]}]'


async def test_binary_attachments_and_binary_ack(server: str, nursery: trio.Nursery) -> None:
    ws = await sio_joined(server, nursery)
    await ws.send_message('452-["message",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]')
    await ws.send_message(bytes([1, 2, 3]))
    await ws.send_message(bytes([4, 5, 6]))
    assert await receive(ws, skip_pings=True) == (
        '452-["message-back",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]'
    )
    assert await receive(ws, skip_pings=True) == bytes([1, 2, 3])
    assert await receive(ws, skip_pings=True) == bytes([4, 5, 6])
    await ws.send_message('452-789["message-with-ack",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]')
    await ws.send_message(bytes([1, 2, 3]))
    await ws.send_message(bytes([4, 5, 6]))
    assert await receive(ws, skip_pings=True) == '462-789[{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]'
    assert await receive(ws, skip_pings=True) == bytes([1, 2, 3])
    assert await receive(ws, skip_pings=True) == bytes([4, 5, 6])


async def test_socketio_over_polling_orders_the_ack_first(http: httpx.AsyncClient) -> None:
    sid = await polling_open(http, SIO)
    assert (await push(http, SIO, sid, '40{"token":"t"}\x1e42["message","x"]')).status_code == 400  # not yet joined
    sid = await polling_open(http, SIO)
    assert (await push(http, SIO, sid, '40{"token":"t"}')).text == "ok"
    records = (await poll(http, SIO, sid)).text.split("\x1e")
    assert records[0].startswith("40{") and records[1] == '42["auth",{"token":"t"}]'
    assert (await push(http, SIO, sid, '42["message","x"]\x1e421["message-with-ack","y"]')).text == "ok"
    assert (await poll(http, SIO, sid)).text == '42["message-back","x"]\x1e431["y"]'
    # Binary over polling: attachments travel base64-encoded in the payload.
    assert (await push(http, SIO, sid, '451-["message",{"_placeholder":true,"num":0}]\x1ebAQI=')).text == "ok"
    assert (await poll(http, SIO, sid)).text == '451-["message-back",{"_placeholder":true,"num":0}]\x1ebAQI='
