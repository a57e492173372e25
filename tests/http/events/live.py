"""Raw Engine.IO over real HTTP and WebSocket, for tests against a running server."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, connect_websocket_url

from tests.event_payloads import check_socketio_frame

WAIT = 5.0  # generous bound on anything a test waits for; never asserted on


def ws_url(base: str, path: str) -> str:
    return base.replace("http://", "ws://", 1) + path


async def polling_open(http: httpx.AsyncClient, path: str, **params: str) -> str:
    """Open a polling session; returns its sid."""
    response = await http.get(path, params={"EIO": "4", "transport": "polling", **params})
    assert response.status_code == 200, response.text
    assert response.text.startswith("0")
    return orjson.loads(response.text[1:])["sid"]


async def poll(http: httpx.AsyncClient, path: str, sid: str) -> httpx.Response:
    with trio.fail_after(WAIT):
        return await http.get(path, params={"EIO": "4", "transport": "polling", "sid": sid})


async def push(http: httpx.AsyncClient, path: str, sid: str, body: str | bytes) -> httpx.Response:
    with trio.fail_after(WAIT):
        return await http.post(path, params={"EIO": "4", "transport": "polling", "sid": sid}, content=body)


async def open_ws(nursery: trio.Nursery, base: str, path: str, **params: str) -> WebSocketConnection:
    query = "&".join(f"{k}={v}" for k, v in {"EIO": "4", "transport": "websocket", **params}.items())
    with trio.fail_after(WAIT):
        return await connect_websocket_url(nursery, ws_url(base, f"{path}?{query}"), max_message_size=2**24)


async def receive(ws: WebSocketConnection, *, skip_pings: bool = False) -> str | bytes:
    """The next frame; with `skip_pings`, pings are answered as a client does and read past.
    An event frame's payload is held to its schema.

    Answering matters where the heartbeat is short (the conformance apps ping every 300 ms):
    on a loaded machine a ping can come before the frame a test waits for, and one left
    unanswered would have the session closed 200 ms later.
    """
    with trio.fail_after(WAIT):
        while True:
            message = await ws.get_message()
            if not (skip_pings and message == "2"):
                check_socketio_frame(message)
                return message
            await ws.send_message("3")


async def closed(ws: WebSocketConnection) -> bool:
    """True once the server has closed the WebSocket (messages before that are dropped)."""
    with trio.fail_after(WAIT):
        try:
            while True:
                await ws.get_message()
        except ConnectionClosed:
            return True


def handshake(frame: Any) -> dict[str, Any]:
    assert isinstance(frame, str) and frame.startswith("0"), frame
    return orjson.loads(frame[1:])


async def ws_refusal(base: str, path: str, **params: str) -> tuple[int, bytes | None]:
    """Try a WebSocket that the server must refuse; returns the HTTP status and body."""
    from trio_websocket import ConnectionRejected, open_websocket_url

    query = "&".join(f"{k}={v}" for k, v in {"EIO": "4", "transport": "websocket", **params}.items())
    with trio.fail_after(WAIT):
        try:
            async with open_websocket_url(ws_url(base, f"{path}?{query}")):
                pass
        except ConnectionRejected as exc:
            return exc.status_code, exc.body
    raise AssertionError("the WebSocket was accepted")
