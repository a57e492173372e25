"""Events API over HTTP: the SSE stream and the event catalogue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import orjson
import trio
from pydantic import Field
from quart import Blueprint, Response, request
from quart_schema import tag, validate_querystring, validate_response

from volthub.config import EventsSettings, events_ws_url
from volthub.http import access
from volthub.http.errors import ApiError
from volthub.http.events.registry import SERVER_CLOSING, ConnectionRegistry
from volthub.http.events.socketio import SLOW_CONSUMER, SSE_DEFAULT_FORM, SSE_ENCODERS, sse_wire
from volthub.http.openapi import responds
from volthub.http.runtime import runtime
from volthub.http.schemas import Model, Query
from volthub.hub.fanout import Fanout
from volthub.metrics import EVENTS_CONNECTIONS, observe_lag
from volthub.protocol import catalogue, sse
from volthub.services.accounts import User

blueprint = Blueprint("events", __name__, url_prefix="/api/events")

# Longest `events` filter accepted; the catalogue has about 30 names.
MAX_FILTER_NAMES = 64


class StreamQuery(Query):
    events: str | None = Field(
        None, max_length=4096, description="comma-separated Events API names; only these are sent"
    )
    messages: Literal["named", "unnamed", "both"] = Field(
        "named",
        description="which SSE form of each event to send: `named` (the default: each event once,"
        " as `event: <name>`, for `addEventListener(name)` and SSE libraries), `unnamed` (for"
        " `EventSource.onmessage`) or `both` (the named message, then an unnamed one with the"
        " same envelope and id)",
    )


class PayloadFieldOut(Model):
    name: str
    type: str
    description: str
    optional: bool


class TransportsOut(Model):
    eventsApi: bool
    webhooks: bool


class EventTypeOut(Model):
    name: str
    group: str
    description: str
    transports: TransportsOut
    emitted: bool = Field(
        description="true when something on the platform really sends it; false for the hype-train"
        " events (never sent) and for events whose producer has not landed yet"
    )
    sandbox: bool = Field(
        description="the sandbox (and `volthub trigger`) can send it as a test event: every emitted event"
    )
    public: bool = Field(description="sent to anonymous subscribers of the channel too")
    aliasOf: str | None
    webhookScope: str | None
    fields: list[PayloadFieldOut]


class EventTypesOut(Model):
    example = {
        "groups": ["chat"],
        "types": [
            {
                "name": "Speedrun Club",
                "group": "chat",
                "description": "Speedruns and chill every Friday.",
                "transports": {"eventsApi": False, "webhooks": False},
                "emitted": False,
                "sandbox": False,
                "public": False,
                "aliasOf": None,
                "webhookScope": "chat:read",
                "fields": [
                    {
                        "name": "Speedrun Club",
                        "type": "chat.message",
                        "description": "Speedruns and chill every Friday.",
                        "optional": False,
                    }
                ],
            }
        ],
        "wsUrl": "https://volthub.example/wsUrl",
    }

    groups: list[str]
    types: list[EventTypeOut]
    wsUrl: str = Field(
        description="the Events API's WebSocket base address (`[events] public_ws_url`, by default the"
        " gateway's port): a Socket.IO client connects to `{wsUrl}/ws/events`"
    )


_SSE_OPEN = EVENTS_CONNECTIONS.labels("sse", "mount")


class SseSubscriber:
    """One SSE stream, as the fan-out sees it: a bounded queue of encoded events."""

    transport = "sse"

    def __init__(self, queue_size: int, form: str = SSE_DEFAULT_FORM) -> None:
        self.wire = sse_wire(form)
        self.lag_since: float | None = None  # a fan-out event whose write is to be timed
        self.send, self.receive = trio.open_memory_channel[bytes](queue_size)
        self.reason: str | None = None
        self.code = SLOW_CONSUMER

    def deliver(self, frame: bytes) -> str | None:
        try:
            self.send.send_nowait(frame)
        except trio.WouldBlock:
            return None
        except trio.ClosedResourceError:
            pass  # the stream is ending; its finally removes this subscriber
        return self.transport

    def note_lag(self, since: float) -> None:
        if self.lag_since is None:
            self.lag_since = since

    def overflow(self, reason: str) -> None:
        self.reason = reason
        self.send.close()  # the stream sends what it holds, then the reason, then ends

    def end(self, code: str, reason: str) -> None:
        """The connection registry ends the stream (a revoked grant, a deleted app, a server
        shutting down): what it holds is sent, then its last event says why."""
        self.code = code
        self.overflow(reason)

    def last_event(self) -> bytes | None:
        """The stream's final event once it was ended: `shutdown` {reason} when the server
        shuts down, else `error` {code, message}; None while it runs."""
        if self.reason is None:
            return None
        if self.code == SERVER_CLOSING:
            return sse.encode(_json({"reason": self.reason}), event="shutdown")
        return sse.encode(_json({"code": self.code, "message": self.reason}), event="error")


@blueprint.get("/types")
@access.public
@tag(["Events"])
@validate_response(EventTypesOut)
async def event_types() -> EventTypesOut:
    """Every event name of the Events API and of webhooks, with its group, its transports,
    whether anything really emits it (the hype-train events never fire; others
    until their producer lands), whether the sandbox can send it as a test event, whether
    anonymous Events API subscribers get it, and its payload fields; and `wsUrl`, where
    Socket.IO clients connect (`{wsUrl}/ws/events`)."""
    return EventTypesOut.model_validate({**catalogue.document(), "wsUrl": events_ws_url(runtime().settings)})


@blueprint.get("/stream")
@access.token()
@tag(["Events"])
@responds(200, "The event stream", "text/event-stream")
@validate_querystring(StreamQuery)
async def stream(query_args: StreamQuery) -> Response:
    """Server-sent events of the token owner's channel (any valid token; no scope needed).

    Send `Accept: text/event-stream`. The stream opens with `event: connected`
    (`{channelUsername, channelId}`), then one event per platform event: `event: <name>`,
    `id: <event id>`, `data: <envelope {event, data, timestamp}>`: each event once, named
    after its type, which is what `EventSource.addEventListener(name)` and SSE libraries
    expect. `messages=unnamed` sends the same envelope and id as an unnamed message instead
    (`id:` and `data:` only), which is what a browser's `EventSource.onmessage` receives;
    `messages=both` sends the named message followed by the unnamed one. `events=a,b` keeps only
    those names (unknown names: 400 `unknown_event`); `connected` is sent whatever the
    filter. Comment lines (`: keep-alive`) flow while idle.

    Resume: reconnect with `Last-Event-ID` to get the events after that id from a bounded
    in-memory buffer of the channel's recent events (`[events] resume_buffer_size`), with
    nothing lost or repeated. When the id is no longer in the buffer, the stream first
    sends `event: missed` (`{lastEventId, message}`: older events may be lost), then every
    event the buffer still holds, oldest first.

    A client that reads too slowly to keep up (`[events] queue_size` events waiting) gets
    `event: error` (`{code: "SLOW_CONSUMER", message}`) and the stream ends. A stream opened
    with an app's token ends with `event: error` (`{code: "AUTHORIZATION_REVOKED", message}`)
    when the user revokes that app's access or the app is deleted; one opened with a
    first-party token, when its session is revoked (`DELETE /api/auth/sessions/{id}`, logout).
    """
    names = _event_filter(query_args.events)
    user = await _token_owner()
    caller = access.principal()
    return await stream_response(user, names, query_args.messages, caller.client_id, caller.session_id)


async def stream_response(
    user: User, names: frozenset[str] | None, form: str, client_id: str | None, session_id: str | None
) -> Response:
    """The SSE response of `user`'s channel (also the developer dashboard's inspector)."""
    rt = runtime()
    last_id = sse.last_event_id(request.headers.get("Last-Event-ID"))
    await rt.bus.prepare([user.id])  # this process hears the channel and holds its recent events
    body = event_stream(
        rt.services.fanout,
        rt.settings.events,
        user,
        names,
        last_id,
        form,
        client_id,
        rt.services.connections,
        session_id,
    )
    response = Response(body, status=200, content_type="text/event-stream; charset=utf-8")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream
    response.timeout = None  # endless: Quart's RESPONSE_TIMEOUT must not cut it
    return response


def _event_filter(raw: str | None) -> frozenset[str] | None:
    if raw is None:
        return None
    names = [name.strip() for name in raw.split(",") if name.strip()]
    if not names:
        return None
    if len(names) > MAX_FILTER_NAMES:
        raise ApiError(400, "validation_error", f"events: at most {MAX_FILTER_NAMES} names", {"field": "events"})
    unknown = catalogue.unknown_events_api_names(names)
    if unknown:
        raise ApiError(
            400,
            "unknown_event",
            f"events: not Events API event names: {', '.join(unknown)}",
            {"field": "events", "unknown": unknown},
        )
    return frozenset(names)


async def _token_owner() -> User:
    user_id = access.principal().user_id
    user = await runtime().services.accounts.get_user(user_id)
    if user is None:
        raise access.unauthorized("invalid_token", "the token's user no longer exists")
    return user


async def event_stream(
    fanout: Fanout,
    settings: EventsSettings,
    user: User,
    names: frozenset[str] | None,
    last_id: str | None,
    form: str = SSE_DEFAULT_FORM,
    client_id: str | None = None,
    connections: ConnectionRegistry | None = None,
    session_id: str | None = None,
) -> AsyncIterator[bytes]:
    subscriber = SseSubscriber(settings.queue_size, form)
    encode = SSE_ENCODERS[form]
    registered = connections.add(subscriber, user.id, client_id, session_id) if connections is not None else None
    # Subscribe and read the resume buffer in one synchronous step (no await between):
    # every event is then either in `resume.events` or delivered live, exactly once.
    subscription = fanout.subscribe(subscriber, user.id, owner=True, names=names, user_id=user.id, viewer=False)
    resume = fanout.since(user.id, last_id)
    if connections is not None:
        connections.end_if_closing(subscriber)  # opened while the server shuts down
    _SSE_OPEN.inc()
    try:
        yield sse.encode(_json({"channelUsername": user.username, "channelId": user.id}), event="connected")
        if not resume.found:
            yield sse.encode(
                _json(
                    {
                        "lastEventId": last_id,
                        "message": "that event is no longer in the resume buffer; older events may be lost",
                    }
                ),
                event="missed",
            )
        for event in resume.events:
            if subscription.wants(event):
                yield encode(event)
        while True:
            frame: bytes | None = None
            with trio.move_on_after(settings.sse_keepalive_seconds):
                try:
                    frame = await subscriber.receive.receive()
                except trio.EndOfChannel:
                    break
            # Never yield inside the cancel scope: the consumer runs between yields.
            yield sse.KEEP_ALIVE if frame is None else frame
            if subscriber.lag_since is not None and subscriber.receive.statistics().current_buffer_used == 0:
                observe_lag(subscriber.lag_since)  # the timed event has been written
                subscriber.lag_since = None
        last = subscriber.last_event()
        if last is not None:
            yield last
    finally:
        _SSE_OPEN.dec()
        fanout.remove(subscriber)
        if connections is not None and registered is not None:
            connections.discard(subscriber, registered)


def _json(value: Any) -> bytes:
    return orjson.dumps(value)
