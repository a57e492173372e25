"""The Events API over Server-Sent Events (GET /api/events/stream), against a live server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import trio
from httpx_sse import ServerSentEvent, aconnect_sse

from tests.conftest import LiveServer, make_settings, register_live, served
from tests.conftest import RegisteredUser as Account
from volthub.config import EventsSettings
from volthub.http.blueprints.events import event_stream
from volthub.http.events.socketio import SSE_WIRE, sse_named
from volthub.hub.fanout import Fanout
from volthub.hub.publisher import Event
from volthub.persistence.users import User

STREAM = "/api/events/stream"


@pytest.fixture
async def server(sqlite_url: str, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    settings = make_settings(
        sqlite_url, events={"resume_buffer_size": 5, "sse_keepalive_seconds": 0.2}, ratelimit={"enabled": False}
    )
    async with served(nursery, settings) as server:
        yield server


@pytest.fixture
async def owner(server: LiveServer) -> Account:
    return await register_live(server.url)


@pytest.fixture
async def http(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        yield client


async def sandbox(http: httpx.AsyncClient, user: Account, event_type: str, **fields: Any) -> dict[str, Any]:
    response = await http.post(
        "/api/integrations/oauth/test/events",
        headers=user.headers,
        json={"eventType": event_type, "channelId": user.id, **fields},
    )
    assert response.status_code == 200, response.text
    return response.json()


async def dispatched(events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
    """The events a browser's EventSource dispatches. httpx-sse also yields a data-less event
    for the blank line ending a keep-alive comment, carrying the last id seen; a browser
    dispatches nothing for it, and neither do we."""
    async for sse in events:
        if sse.data:
            yield sse


class Stream:
    """An open SSE stream and its events, read as they come."""

    def __init__(self, events: AsyncIterator[ServerSentEvent]) -> None:
        self._events = dispatched(events)

    async def next(self) -> ServerSentEvent:
        with trio.fail_after(5):
            return await self._events.__anext__()


async def collect(http: httpx.AsyncClient, user: Account, until: int, **kwargs: Any) -> list[ServerSentEvent]:
    """Open a stream, read `until` events (the first is `connected`), close it."""
    found: list[ServerSentEvent] = []
    async with aconnect_sse(
        http, "GET", STREAM, headers={**user.headers, **kwargs.pop("headers", {})}, **kwargs
    ) as source:
        with trio.fail_after(5):
            async for sse in dispatched(source.aiter_sse()):
                found.append(sse)
                if len(found) == until:
                    break
    return found


async def test_connected_then_events_with_ids(http: httpx.AsyncClient, owner: Account) -> None:
    async with aconnect_sse(http, "GET", STREAM, headers={**owner.headers, "Accept": "text/event-stream"}) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        stream = Stream(source.aiter_sse())
        first = await stream.next()
        assert first.event == "connected"
        assert orjson.loads(first.data) == {"channelUsername": owner.username, "channelId": owner.id}
        sent = await sandbox(http, owner, "raid", amount=25)
        event = await stream.next()
    assert event.event == "channel.raid" and event.id == sent["eventId"]
    envelope = orjson.loads(event.data)
    assert set(envelope) == {"event", "data", "timestamp"}
    assert envelope["event"] == "channel.raid" and envelope["data"]["viewers"] == 25
    assert envelope["data"]["isTest"] is True and envelope["data"] == sent["data"]


async def test_filter_keeps_only_the_named_events(http: httpx.AsyncClient, owner: Account) -> None:
    async with aconnect_sse(
        http,
        "GET",
        STREAM,
        headers=owner.headers,
        params={"events": "channel.follow, chat.message", "messages": "named"},
    ) as source:
        stream = Stream(source.aiter_sse())
        assert (await stream.next()).event == "connected"  # whatever the filter
        await sandbox(http, owner, "volt_tip")
        await sandbox(http, owner, "follow")
        await sandbox(http, owner, "subscription")
        await sandbox(http, owner, "chat_message", message="hi")
        names = [(await stream.next()).event, (await stream.next()).event]
    assert names == ["channel.follow", "chat.message"]


@pytest.mark.parametrize("events", ["channel.follow,nope", "channel.subscription.end", "user.follow"])
async def test_filter_with_unknown_names_is_400(http: httpx.AsyncClient, owner: Account, events: str) -> None:
    response = await http.get(STREAM, headers=owner.headers, params={"events": events})
    assert response.status_code == 400
    assert response.json()["error"] == "unknown_event"


async def test_resume_with_last_event_id_loses_and_repeats_nothing(
    http: httpx.AsyncClient, owner: Account, server: LiveServer
) -> None:
    first = await sandbox(http, owner, "follow")
    async with aconnect_sse(http, "GET", STREAM, headers=owner.headers) as source:
        stream = Stream(source.aiter_sse())
        assert (await stream.next()).event == "connected"  # no Last-Event-ID: nothing replayed
        second = await sandbox(http, owner, "volt_tip")
        seen = await stream.next()
        assert seen.id == second["eventId"]
    # Disconnected: these happen while nobody listens.
    missed = [await sandbox(http, owner, kind) for kind in ("raid", "subscription", "chat_message")]
    async with aconnect_sse(
        http, "GET", STREAM, headers={**owner.headers, "Last-Event-ID": seen.id}, params={"messages": "named"}
    ) as source:
        stream = Stream(source.aiter_sse())
        assert (await stream.next()).event == "connected"
        replayed = [await stream.next() for _ in missed]
        live = await sandbox(http, owner, "gift_subscription", quantity=3)
        after = await stream.next()
    assert [e.id for e in replayed] == [m["eventId"] for m in missed]
    assert [e.event for e in replayed] == ["channel.raid", "channel.subscribe", "chat.message"]
    assert after.id == live["eventId"] and after.event == "channel.subscription.gift"
    assert first["eventId"] not in {e.id for e in replayed}


async def test_resume_respects_the_filter(http: httpx.AsyncClient, owner: Account) -> None:
    anchor = await sandbox(http, owner, "follow")
    await sandbox(http, owner, "volt_tip")
    wanted = await sandbox(http, owner, "raid")
    found = await collect(
        http, owner, 2, params={"events": "channel.raid"}, headers={"Last-Event-ID": anchor["eventId"]}
    )
    assert [e.event for e in found] == ["connected", "channel.raid"] and found[1].id == wanted["eventId"]


async def test_unknown_last_event_id_sends_missed_then_the_buffer(http: httpx.AsyncClient, owner: Account) -> None:
    sent = [await sandbox(http, owner, "follow") for _ in range(7)]  # the buffer keeps the last 5
    found = await collect(http, owner, 7, headers={"Last-Event-ID": sent[0]["eventId"]}, params={"messages": "named"})
    assert [e.event for e in found[:2]] == ["connected", "missed"]
    assert orjson.loads(found[1].data)["lastEventId"] == sent[0]["eventId"]
    assert [e.id for e in found[2:]] == [s["eventId"] for s in sent[2:]]


async def test_each_event_comes_once_named_by_default(http: httpx.AsyncClient, owner: Account) -> None:
    async with aconnect_sse(http, "GET", STREAM, headers=owner.headers) as source:
        stream = Stream(source.aiter_sse())
        assert (await stream.next()).event == "connected"
        sent = [await sandbox(http, owner, "follow"), await sandbox(http, owner, "raid")]
        seen = [await stream.next(), await stream.next()]
    # With two forms the second read would be the unnamed copy of the first event.
    assert [(e.event, e.id) for e in seen] == [
        ("channel.follow", sent[0]["eventId"]),
        ("channel.raid", sent[1]["eventId"]),
    ]


async def test_messages_both_sends_named_then_unnamed(http: httpx.AsyncClient, owner: Account) -> None:
    async with aconnect_sse(http, "GET", STREAM, headers=owner.headers, params={"messages": "both"}) as source:
        stream = Stream(source.aiter_sse())
        assert (await stream.next()).event == "connected"
        sent = await sandbox(http, owner, "follow")
        named, unnamed = await stream.next(), await stream.next()
    assert named.event == "channel.follow" and unnamed.event == "message"  # "message": no event field
    assert named.id == unnamed.id == sent["eventId"]
    assert orjson.loads(named.data) == orjson.loads(unnamed.data)
    assert orjson.loads(unnamed.data)["event"] == "channel.follow"


@pytest.mark.parametrize(("form", "expected"), [("named", "channel.raid"), ("unnamed", "message")])
async def test_messages_parameter_picks_one_form(
    http: httpx.AsyncClient, owner: Account, form: str, expected: str
) -> None:
    async with aconnect_sse(http, "GET", STREAM, headers=owner.headers, params={"messages": form}) as source:
        stream = Stream(source.aiter_sse())
        assert (await stream.next()).event == "connected"
        first = await sandbox(http, owner, "raid")
        second = await sandbox(http, owner, "raid")
        seen = [await stream.next(), await stream.next()]
    assert [e.event for e in seen] == [expected, expected]
    assert [e.id for e in seen] == [first["eventId"], second["eventId"]]


async def test_unknown_messages_form_is_400(http: httpx.AsyncClient, owner: Account) -> None:
    response = await http.get(STREAM, headers=owner.headers, params={"messages": "all"})
    assert response.status_code == 400
    assert set(response.json()) >= {"error", "message"}


async def test_keep_alive_comments_flow_while_idle(server: LiveServer, owner: Account) -> None:
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as http,
        http.stream("GET", STREAM, headers=owner.headers) as response,
    ):
        lines = response.aiter_lines()
        with trio.fail_after(5):
            async for line in lines:
                if line.startswith(":"):
                    break
    assert line == ": keep-alive"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}])
async def test_without_a_valid_token_is_401_json(http: httpx.AsyncClient, headers: dict[str, str]) -> None:
    response = await http.get(STREAM, headers={**headers, "Accept": "text/event-stream"})
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"] in ("missing_token", "invalid_token")


async def test_events_of_other_channels_are_not_sent(
    http: httpx.AsyncClient, owner: Account, server: LiveServer
) -> None:
    other = await register_live(server.url)
    async with aconnect_sse(http, "GET", STREAM, headers=owner.headers) as source:
        stream = Stream(source.aiter_sse())
        await stream.next()
        await sandbox(http, other, "follow")
        mine = await sandbox(http, owner, "raid")
        assert (await stream.next()).id == mine["eventId"]


# ------------------------------------------------------------------ the stream, without a server


def _event(n: int, channel: str = "c1", name: str = "channel.follow") -> Event:
    return Event(f"id{n}", name, channel, {"n": n}, "2026-11-22T13:07:00.000Z")


async def test_a_stream_that_falls_behind_gets_the_reason_and_ends() -> None:
    fanout = Fanout(resume_size=10)
    fanout.register_wire(SSE_WIRE, sse_named)
    settings = EventsSettings(queue_size=8)
    user = User("c1", "streamer", "Streamer", None, "", 0, 0)
    stream = event_stream(fanout, settings, user, None, None)
    assert (await stream.__anext__()).startswith(b"event: connected\n")
    for n in range(20):  # nobody reads: the queue holds 8, the 9th overflows
        fanout.publish(_event(n))
    assert fanout.overflowed == 1 and fanout.subscriber_count("c1") == 0
    rest = [frame async for frame in stream]
    assert [frame.split(b"\n")[1] for frame in rest[:8]] == [f"id: id{n}".encode() for n in range(8)]
    assert rest[8].startswith(b"event: error\n") and b"SLOW_CONSUMER" in rest[8]
    assert len(rest) == 9


async def test_closing_the_stream_unsubscribes() -> None:
    fanout = Fanout()
    fanout.register_wire(SSE_WIRE, sse_named)
    user = User("c1", "streamer", "Streamer", None, "", 0, 0)
    stream = event_stream(fanout, EventsSettings(), user, frozenset({"channel.raid"}), None)
    await stream.__anext__()
    assert fanout.subscriber_count("c1") == 1
    await stream.aclose()
    assert fanout.subscriber_count("c1") == 0
    fanout.publish(_event(1))  # nothing to deliver to, nothing breaks
