"""Socket.IO connection state recovery (the protocol of the official clients v4.6+).

A namespace connection that asked for it (``auth.recovery``) gets a private id ``pid`` in
its CONNECT answer, and every platform event it is sent carries the event's id as a last,
string argument: the *offset* the client remembers. When the connection drops for a reason
that is not the client's own choice, what it was (socket id, user, subscriptions) is kept
here for ``[events] recovery_window_seconds``. A client reconnecting within that window
sends ``{pid, offset}`` in its CONNECT auth; it gets the same socket id and ``pid`` back
(``socket.recovered`` is true on the client), its subscriptions, and every event after the
offset, once, in order, from the fan-out's resume source ``Fanout.since``.

Opt-in per connection, because the offset is an extra argument on every event: clients
that do not know about it (python-socketio has no recovery) would see it too.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from volthub.protocol.engineio.session import (
    CLOSE_FORCED,
    CLOSE_PING_TIMEOUT,
    CLOSE_TRANSPORT,
    CLOSE_TRANSPORT_ERROR,
)

# Why a connection ended, when it may come back and recover (as the reference server has it).
RECOVERABLE: Final = frozenset(
    {CLOSE_TRANSPORT, CLOSE_TRANSPORT_ERROR, CLOSE_PING_TIMEOUT, CLOSE_FORCED, "server shutting down"}
)
# Kept states at most; beyond it the oldest is forgotten first.
MAX_KEPT: Final = 100_000


@dataclass(slots=True)
class Lost:
    """A dropped namespace connection that may still recover."""

    sid: str
    namespace: str
    user_id: str | None
    client_id: str | None
    channels: dict[str, bool]  # channel id -> owner subscription
    # Per channel, the last event id the connection was sent: where to resume a channel
    # other than the one the client's offset names.
    last_sent: dict[str, str] = field(default_factory=dict)
    expires_at: float = 0.0


class RecoveryStore:
    def __init__(self, window_seconds: float, max_kept: int = MAX_KEPT) -> None:
        self.window = window_seconds
        self._max = max_kept
        self._lost: OrderedDict[str, Lost] = OrderedDict()  # pid -> state; oldest first

    @property
    def enabled(self) -> bool:
        return self.window > 0

    def keep(self, pid: str, lost: Lost, now: float) -> None:
        self._expire(now)
        lost.expires_at = now + self.window
        self._lost[pid] = lost
        while len(self._lost) > self._max:
            self._lost.popitem(last=False)

    def take(self, pid: str, now: float) -> Lost | None:
        """The state kept under ``pid``, once; None when unknown or expired."""
        self._expire(now)
        return self._lost.pop(pid, None)

    def channels_of(self, pid: str) -> list[str]:
        """The channels of the state kept under ``pid`` (left in place), for following
        them before the state is taken."""
        lost = self._lost.get(pid)
        return [] if lost is None else list(lost.channels)

    def __len__(self) -> int:
        return len(self._lost)

    def _expire(self, now: float) -> None:
        while self._lost:
            pid, lost = next(iter(self._lost.items()))
            if lost.expires_at > now:
                return
            del self._lost[pid]
