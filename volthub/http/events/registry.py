"""Every open Events API connection (Socket.IO namespace or SSE stream), by who opened it.

Used to end connections whose right to exist went away: a revoked OAuth grant or a deleted
app (``user.authorization.revoke`` on the bus) ends the connections that user opened with
that app's tokens, and a revoked first-party session (the bus-only ``SESSION_REVOKED``)
ends those opened with that session's token, each told why. ``close_all(reason)`` ends every one of them,
e.g. for a server shutting down.

Also used to reach a member's connections: a channel-role change (the bus-only
``roles.BADGES_CHANGED``, published by the channel actor and relayed to every process on
PostgreSQL) pushes ``channel:badges`` to every Socket.IO namespace the member opened, with
any token, without a reconnect. SSE streams are not told: they
carry platform events only.

Everything runs in the Trio thread; no locking, no awaiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final, Protocol, runtime_checkable

from volthub.hub.components.roles import BADGES_CHANGED
from volthub.hub.publisher import Event
from volthub.services.sessions import SESSION_REVOKED

log = logging.getLogger(__name__)

AUTHORIZATION_REVOKED: Final = "AUTHORIZATION_REVOKED"
SERVER_CLOSING: Final = "SERVER_CLOSING"
# The Socket.IO message that tells a member their badges in a channel changed.
BADGES_MESSAGE: Final = "channel:badges"


class Closable(Protocol):
    def end(self, code: str, reason: str) -> None:
        """Tell the client ``{code, message: reason}`` and end the connection. Must not block."""


class SessionHolder(Protocol):
    def close_sessions(self, reason: str) -> int:
        """Close every transport session still open (an Engine.IO session that never joined a
        namespace has no entry of its own); how many. Must not block."""


@runtime_checkable
class Pushable(Protocol):
    def push(self, name: str, data: dict[str, Any]) -> None:
        """Send the client one message now. Must not block."""


# (user id, OAuth client id or a first-party session's marker); None: anonymous, or a
# first-party token without a stored session.
Key = tuple[str | None, str | None]


def _session_marker(session_id: str | None) -> str | None:
    # A space never occurs in a client id, so a marker cannot be mistaken for one.
    return None if session_id is None else f"session {session_id}"


class ConnectionRegistry:
    def __init__(self, *, interest: Callable[[str, bool], None] | None = None) -> None:
        self._by_key: dict[Key, dict[Closable, None]] = {}
        self._keys_of_user: dict[str, dict[Key, None]] = {}  # user id -> their keys
        self._holders: list[SessionHolder] = []
        # Set by close_all: the reason every connection registered from then on is ended with.
        self.closing: str | None = None
        # Told (user id, True) at a user's first connection here and (user id, False) after
        # their last: a broker with per-channel interest then follows the person's subject
        # (Broker.member_interest).
        self.interest = interest

    def hold_sessions(self, holder: SessionHolder) -> None:
        """``close_all`` also closes ``holder``'s sessions (an Engine.IO endpoint, the gateway)."""
        self._holders.append(holder)

    def add(
        self, connection: Closable, user_id: str | None, client_id: str | None, session_id: str | None = None
    ) -> Key:
        """Register a connection opened with an OAuth app's token (`client_id`) or a
        first-party token (its `session_id`, if it has one)."""
        key = (user_id, client_id if client_id is not None else _session_marker(session_id))
        self._by_key.setdefault(key, {})[connection] = None
        if user_id is not None:
            if user_id not in self._keys_of_user and self.interest is not None:
                self.interest(user_id, True)
            self._keys_of_user.setdefault(user_id, {})[key] = None
        return key

    def discard(self, connection: Closable, key: Key) -> None:
        found = self._by_key.get(key)
        if found is not None:
            found.pop(connection, None)
            if not found:
                del self._by_key[key]
                self._forget_key(key)

    def _forget_key(self, key: Key) -> None:
        user_id = key[0]
        keys = None if user_id is None else self._keys_of_user.get(user_id)
        if user_id is None or keys is None:
            return
        keys.pop(key, None)
        if not keys:
            del self._keys_of_user[user_id]
            if self.interest is not None:
                self.interest(user_id, False)

    def of_user(self, user_id: str) -> list[Closable]:
        """Every connection ``user_id`` opened, whatever token (app) it used."""
        keys = self._keys_of_user.get(user_id, {})
        return [connection for key in keys for connection in self._by_key.get(key, ())]

    def __len__(self) -> int:
        return sum(len(found) for found in self._by_key.values())

    def close_app_access(self, user_id: str, client_id: str, reason: str) -> int:
        """End what ``user_id`` opened with ``client_id``'s tokens; how many were ended."""
        return self._end(list(self._by_key.get((user_id, client_id), ())), AUTHORIZATION_REVOKED, reason)

    def close_session(self, user_id: str, session_id: str, reason: str) -> int:
        """End what ``user_id`` opened with the first-party session's token; how many."""
        key = (user_id, _session_marker(session_id))
        return self._end(list(self._by_key.get(key, ())), AUTHORIZATION_REVOKED, reason)

    def close_all(self, reason: str) -> int:
        """The one way a shutting-down server ends the Events API: every Socket.IO namespace
        gets `error` {code: SERVER_CLOSING, message: reason} and its session is closed as
        "going away" (clients reconnect, here once back or elsewhere), every SSE stream ends
        with its `shutdown` event, then the sessions that never joined a namespace are
        closed. Connections registered afterwards are ended at once (``end_if_closing``).
        How many were ended."""
        self.closing = reason
        every = [connection for found in self._by_key.values() for connection in found]
        ended = self._end(every, SERVER_CLOSING, reason)
        for holder in self._holders:
            ended += holder.close_sessions(reason)
        return ended

    def end_if_closing(self, connection: Closable) -> None:
        """For a connection registered just now: end it if the server is shutting down."""
        if self.closing is not None:
            self._end([connection], SERVER_CLOSING, self.closing)

    def push_badges(self, data: dict[str, Any]) -> int:
        """Tell the member's Socket.IO connections their new badges; how many were told."""
        user_id = data.get("userId")
        if not isinstance(user_id, str):
            return 0
        told = 0
        for connection in self.of_user(user_id):
            if isinstance(connection, Pushable):
                try:
                    connection.push(BADGES_MESSAGE, data)
                    told += 1
                except Exception:  # one broken connection must not keep the others uninformed
                    log.exception("pushing badges to an Events API connection failed")
        return told

    def on_event(self, event: Event) -> None:
        """Bus listener: a revoked grant, a deleted app or a revoked session ends its
        connections; a role change pushes the member's new badges."""
        if event.is_test:
            return
        if event.name == BADGES_CHANGED:
            self.push_badges(event.data)
            return
        if event.name == SESSION_REVOKED:
            user_id, session_id = event.data.get("userId"), event.data.get("sessionId")
            if isinstance(user_id, str) and isinstance(session_id, str):
                self.close_session(user_id, session_id, "this session was signed out")
            return
        if event.name != "user.authorization.revoke":
            return
        user_id, client_id = event.data.get("userId"), event.data.get("clientId")
        if isinstance(user_id, str) and isinstance(client_id, str):
            self.close_app_access(user_id, client_id, "the app's access to this account was revoked")

    def _end(self, connections: list[Closable], code: str, reason: str) -> int:
        for connection in connections:
            try:
                connection.end(code, reason)
            except Exception:  # one broken connection must not keep the others open
                log.exception("ending an Events API connection failed")
        return len(connections)
