"""Adapter-level fuzzing: random input over real HTTP and WebSocket never kills the server
or another connection (the conformance server, in-process; its Socket.IO endpoint takes
binary packets, so it has the most decoding to get wrong)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio_websocket import ConnectionClosed

from tests.http.events.live import handshake, open_ws, polling_open, receive
from volthub.tools import conformance

WIRE = '0123456789/,-[]{}":bAQIDBA=probe\x1e '
frames = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=64),
    st.text(alphabet=WIRE, max_size=48),
    st.sampled_from(["40", "2probe", "5", "3", "1", '452-["message",{"_placeholder":true,"num":0}]', "41"]),
)
examples = settings(
    max_examples=40, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)


@pytest.fixture
async def server(nursery: trio.Nursery) -> AsyncIterator[str]:
    stop = trio.Event()
    bound = await nursery.start(
        lambda task_status: conformance.serve(["127.0.0.1:0"], shutdown=stop, task_status=task_status)
    )
    yield bound[0]
    stop.set()


def generated(strategy: Any) -> list[Any]:
    """Draw the examples first (hypothesis runs sync); the test then sends them on Trio."""
    found: list[Any] = []

    @examples
    @given(strategy)
    def draw(value: Any) -> None:
        found.append(value)

    draw()
    return found


async def echo_still_works(server: str, nursery: trio.Nursery, sentinel: str) -> None:
    ws = await open_ws(nursery, server, "/engine.io/")
    handshake(await receive(ws))
    await ws.send_message("4" + sentinel)
    assert await receive(ws, skip_pings=True) == "4" + sentinel
    await ws.aclose()


async def test_random_websocket_frames(server: str, nursery: trio.Nursery) -> None:
    control = await open_ws(nursery, server, "/socket.io/")
    handshake(await receive(control))
    await control.send_message("40")
    await receive(control, skip_pings=True)
    await receive(control, skip_pings=True)
    for index, sequence in enumerate(generated(st.lists(frames, min_size=1, max_size=6))):
        async with trio.open_nursery() as inner:
            path = "/socket.io/" if index % 2 else "/engine.io/"
            ws = await open_ws(inner, server, path)
            handshake(await receive(ws))
            try:
                for frame in sequence:
                    await ws.send_message(frame)
            except ConnectionClosed:
                pass
            await ws.aclose()
        await control.send_message(f'42["message",{index}]')
        assert await receive(control, skip_pings=True) == f'42["message-back",{index}]'
        await control.send_message("3")  # keep answering pings
    await echo_still_works(server, nursery, "after websocket fuzz")


async def test_random_polling_bodies(server: str, nursery: trio.Nursery) -> None:
    async with httpx.AsyncClient(base_url=server, timeout=5) as http:
        for index, body in enumerate(generated(st.one_of(frames, st.lists(frames, max_size=4).map(_join)))):
            path = "/socket.io/" if index % 2 else "/engine.io/"
            sid = await polling_open(http, path)
            response = await http.post(
                path,
                params={"EIO": "4", "transport": "polling", "sid": sid},
                content=body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass"),
            )
            assert response.status_code in (200, 400, 413)
            # And random query strings on the handshake: always an answer, never a 5xx.
            response = await http.get(path, params={"EIO": str(index % 6), "transport": "polling", "sid": str(index)})
            assert response.status_code < 500
    await echo_still_works(server, nursery, "after polling fuzz")


def _join(parts: list[str | bytes]) -> str:
    return "\x1e".join(p if isinstance(p, str) else p.decode("latin-1") for p in parts)
