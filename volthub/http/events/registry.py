"""Every open Events API connection (Socket.IO namespace or SSE stream), by who opened it.

Used to end connections whose right to exist went away: a revoked OAuth grant or a deleted
app (``user.authorization.revoke`` on the bus) ends the connections that user opened with
that app's tokens, each told why (issue 16). ``close_all(reason)`` ends every one of them,
e.g. for a server shutting down.

Everything runs in the Trio thread; no locking, no awaiting.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

from volthub.hub.publisher import Event

log = logging.getLogger(__name__)

AUTHORIZATION_REVOKED: Final = "AUTHORIZATION_REVOKED"
SERVER_CLOSING: Final = "SERVER_CLOSING"


class Closable(Protocol):
    def end(self, code: str, reason: str) -> None:
        """Tell the client ``{code, message: reason}`` and end the connection. Must not block."""


Key = tuple[str | None, str | None]  # (user id, OAuth client id); None: anonymous / first party


class ConnectionRegistry:
    def __init__(self) -> None:
        self._by_key: dict[Key, dict[Closable, None]] = {}

    def add(self, connection: Closable, user_id: str | None, client_id: str | None) -> Key:
        key = (user_id, client_id)
        self._by_key.setdefault(key, {})[connection] = None
        return key

    def discard(self, connection: Closable, key: Key) -> None:
        found = self._by_key.get(key)
        if found is not None:
            found.pop(connection, None)
            if not found:
                del self._by_key[key]

    def __len__(self) -> int:
        return sum(len(found) for found in self._by_key.values())

    def close_app_access(self, user_id: str, client_id: str, reason: str) -> int:
        """End what ``user_id`` opened with ``client_id``'s tokens; how many were ended."""
        return self._end(list(self._by_key.get((user_id, client_id), ())), AUTHORIZATION_REVOKED, reason)

    def close_all(self, reason: str) -> int:
        """End every registered connection (a server shutting down)."""
        every = [connection for found in self._by_key.values() for connection in found]
        return self._end(every, SERVER_CLOSING, reason)

    def on_event(self, event: Event) -> None:
        """Bus listener: a revoked grant or a deleted app ends its connections."""
        if event.name != "user.authorization.revoke" or event.is_test:
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
