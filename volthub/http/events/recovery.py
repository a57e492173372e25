"""Socket.IO connection state recovery (the protocol of the official clients v4.6+).

A namespace connection that asked for it (``auth.recovery``) gets a private id ``pid`` in
its CONNECT answer, and every platform event it is sent carries the event's id as a last,
string argument: the *offset* the client remembers. When the connection drops for a reason
that is not the client's own choice, what it was (socket id, user, subscriptions) is kept
for ``[events] recovery_window_seconds`` in the broker's store, which every process of the
deployment reads (:mod:`volthub.hub.recovery_store`: PostgreSQL or Redis, in-process on
SQLite). A client
reconnecting within that window, to any process, sends ``{pid, offset}`` in its CONNECT
auth; it gets the same socket id and ``pid`` back (``socket.recovered`` is true on the
client), its subscriptions, and every event after the offset, once, in order, from the
fan-out's bounded resume source ``Fanout.since`` (filled from the broker's stream or the
event log when the process starts following the channel). A client too far behind for that
source is told it was not recovered.

Opt-in per connection, because the offset is an extra argument on every event: clients
that do not know about it (python-socketio has no recovery) would see it too.
"""

from __future__ import annotations

from typing import Final

from volthub.http.events.engineio import SHUTTING_DOWN
from volthub.hub.fanout import Fanout, Resume
from volthub.hub.publisher import Event
from volthub.hub.recovery_store import Lost, RecoveryStore
from volthub.protocol.engineio.session import (
    CLOSE_FORCED,
    CLOSE_PING_TIMEOUT,
    CLOSE_TRANSPORT,
    CLOSE_TRANSPORT_ERROR,
)

# Why a connection ended, when it may come back and recover (as the reference server has it).
RECOVERABLE: Final = frozenset(
    {CLOSE_TRANSPORT, CLOSE_TRANSPORT_ERROR, CLOSE_PING_TIMEOUT, CLOSE_FORCED, SHUTTING_DOWN}
)


def note_start(fanout: Fanout, last_sent: dict[str, str], channel_id: str) -> None:
    """Where a recoverable connection's new channel starts: its newest buffered event
    (nothing before it is owed to the client)."""
    if channel_id not in last_sent:
        buffered = fanout.since(channel_id, "").events  # no such id: the whole buffer
        if buffered:
            last_sent[channel_id] = buffered[-1].id


def missed_events(fanout: Fanout, lost: Lost, offset: str) -> dict[str, list[Event]] | None:
    """Per channel, the events a recovering connection missed, read from the fan-out's
    bounded resume source; None when that cannot be told exactly (the offset, or where a
    channel stood, is no longer there: the client was too far behind), so it is not
    recovered.

    Call it in the same synchronous step as the subscriptions are made again, so each
    event is either replayed or delivered live."""
    missed: dict[str, list[Event]] = {}
    offset_found = False
    for channel_id in lost.channels:
        resume = fanout.since(channel_id, offset)
        if resume.found:
            offset_found = True
        else:  # the offset is another channel's: resume from where this one stood
            mark = lost.last_sent.get(channel_id)
            # No mark: the channel had no event when it was subscribed; all it buffered is owed.
            resume = fanout.since(channel_id, mark) if mark is not None else Resume(resume.events, True)
            # A state written while the connection lived knows where a channel stood when it
            # was subscribed, not what was sent since: exact only if nothing was.
            if not resume.found or (resume.events and not lost.final):
                return None
        missed[channel_id] = resume.events
    return missed if offset_found else None


__all__ = ["RECOVERABLE", "Lost", "RecoveryStore", "missed_events", "note_start"]
