"""Connection state recovery with the official socket.io-client (v4.6+ protocol)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
import trio

from tests.conftest import SOCKET_PATHS, LiveServer, make_settings, register_live, served, socket_path_events
from tests.js_client import run_client
from volthub.http.events.recovery import Lost, RecoveryStore, missed_events, note_start
from volthub.hub.fanout import Fanout
from volthub.hub.publisher import Event


@pytest.fixture(params=SOCKET_PATHS)
async def server(sqlite_url: str, nursery: trio.Nursery, request: pytest.FixtureRequest) -> AsyncIterator[LiveServer]:
    """The Socket.IO paths on the gateway's own port (the default) or on the main port (mount)."""
    settings = make_settings(sqlite_url, events=socket_path_events(request.param), ratelimit={"enabled": False})
    async with served(nursery, settings) as server:
        yield server


@pytest.mark.parametrize(("transports", "target"), [("websocket", "path"), ("default", "namespace")])
async def test_a_dropped_socket_gets_exactly_what_it_missed(server: LiveServer, transports: str, target: str) -> None:
    owner = await register_live(server.url)
    args = (server.url, owner.token, owner.id, transports, target, server.events_url)
    seen = await run_client("recovery_client.mjs", *args, deadline=40)
    assert seen["disconnectReason"] == "forced close"  # engine.close(), as the client names it
    assert seen["gap"] == []
    assert [e["offset"] for e in seen["before"]] == [seen["first"]]
    assert [e["offset"] for e in seen["after"]] == seen["published"]  # exactly those, once, in order
    assert [e["event"] for e in seen["after"]] == ["channel.raid", "channel.volts", "channel.subscribe"]
    assert seen["recovered"] == [False, True]
    assert seen["ids"][0] == seen["ids"][1]  # the same socket id


async def test_store_forgets_expired_and_taken_states() -> None:
    store = RecoveryStore(10.0, max_kept=2)
    lost = Lost("sid", "/", "u1", None, {"c1": True})
    store.keep("p1", lost, now=0.0)
    assert await store.take("p1", "u2", "/", now=5.0) is None  # another user finds nothing
    assert await store.take("p1", "u1", "/other", now=5.0) is None  # nor another namespace
    assert await store.take("p1", "u1", "/", now=5.0) is lost
    assert await store.take("p1", "u1", "/", now=5.0) is None  # once
    store.keep("p2", lost, now=0.0)
    assert await store.take("p2", "u1", "/", now=10.0) is None  # expired
    for n in range(3):
        store.keep(f"q{n}", lost, now=20.0)
    assert len(store) == 2 and await store.take("q0", "u1", "/", now=21.0) is None  # the oldest went first
    assert not RecoveryStore(0).enabled


def buffered(fanout: Fanout, channel_id: str, *ids: str) -> None:
    for seq, event_id in enumerate(ids, start=1):
        fanout.remember(Event(event_id, "chat.message", channel_id, {}, "2026-01-01T00:00:00Z", False, seq))


def test_missed_events_per_channel_from_the_offset_and_where_each_channel_stood() -> None:
    fanout = Fanout(resume_size=3)
    buffered(fanout, "c1", "a1", "a2", "a3")
    buffered(fanout, "c2", "b1", "b2")
    dropped = Lost("sid", "/", "u1", None, {"c1": True, "c2": False}, {"c1": "a1", "c2": "b1"})
    missed = missed_events(fanout, dropped, "a2")  # the offset names c1; c2 resumes from b1
    assert missed is not None
    assert {c: [e.id for e in events] for c, events in missed.items()} == {"c1": ["a3"], "c2": ["b2"]}
    assert missed_events(fanout, dropped, "zz") is None  # an offset no channel has
    buffered(fanout, "c1", "a1", "a2", "a3", "a4")  # a4 pushes a1 out (three kept)
    assert missed_events(fanout, dropped, "a1") is None  # too far behind: told so, nothing read


def test_a_state_written_while_the_connection_lived_recovers_only_exactly() -> None:
    """What a killed process left: where each channel stood when subscribed. The offset's
    channel resumes exactly; another channel only if it had no event since."""
    fanout = Fanout(resume_size=10)
    buffered(fanout, "c1", "a1")
    buffered(fanout, "c2", "b1")
    marks: dict[str, str] = {}
    for channel_id in ("c1", "c2", "c3"):
        note_start(fanout, marks, channel_id)
    assert marks == {"c1": "a1", "c2": "b1"}  # c3 had nothing yet
    live = Lost("sid", "/", "u1", None, {"c1": True, "c2": False, "c3": False}, marks, final=False)
    buffered(fanout, "c1", "a1", "a2", "a3")  # the client got a2 and is owed a3
    found = missed_events(fanout, live, "a2")
    assert found is not None and [e.id for e in found["c1"]] == ["a3"] and found["c2"] == found["c3"] == []
    buffered(fanout, "c2", "b1", "b2")  # c2 had an event: sent or not, nobody can tell
    assert missed_events(fanout, live, "a2") is None
    final = missed_events(fanout, replace(live, final=True), "a2")  # written at the drop: exact
    assert final is not None and [e.id for e in final["c2"]] == ["b2"]
