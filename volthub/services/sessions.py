"""First-party sessions: stored per session token, so a user can list and revoke them.

Sign-in, registration and `volthub token --first-party` each make one; its id is the
token's `sid` claim. Verification asks `active` on every use: the answer is cached per
session for `cache_seconds` (`[oauth] grant_cache_seconds`, as grants are), so a request
costs no query while cached, and callers that miss together share one query. A revocation
drops the entry in this process at once and publishes the bus-only `SESSION_REVOKED`,
which drops it in every other process (on PostgreSQL through the relay) and ends the
session's Events API connections.

Tokens issued before sessions were stored carry no `sid`: they stay valid until they
expire and cannot be revoked one by one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Final

from volthub.hub.clock import Clock, to_ms
from volthub.hub.publisher import Emitter, Event, EventPublisher
from volthub.persistence import Database, Tx
from volthub.persistence import sessions as repo
from volthub.persistence.sessions import Session
from volthub.services.lookup_cache import LookupCache
from volthub.services.tokens import Claims, TokenService

__all__ = ["DEV_TOKEN", "SESSION_REVOKED", "SIGN_IN", "IssuedSession", "Session", "Sessions", "build_sessions"]

# The bus-only message a revocation causes. Not a platform event: the catalogue does not
# know the name, so the Events API fan-out, the resume buffers and the webhook outbox pass
# it by; on PostgreSQL it crosses processes through the relay like any event.
SESSION_REVOKED: Final = "internal.session.revoke"
SIGN_IN: Final = "sign-in"
DEV_TOKEN: Final = "volthub token"


@dataclass(frozen=True)
class IssuedSession:
    token: str
    expires_at: int  # epoch seconds, as the token's `exp`
    session: Session


class Sessions:
    def __init__(
        self, database: Database, publisher: EventPublisher, clock: Clock, tokens: TokenService, cache_seconds: float
    ) -> None:
        self._db = database
        self._publisher = publisher
        self._clock = clock
        self._tokens = tokens
        self._cache: LookupCache[Session | None] = LookupCache(clock, cache_seconds)  # by session id

    async def issue(self, user_id: str, label: str) -> IssuedSession:
        """A session token for `user_id`, and its stored session."""
        session_id = uuid.uuid4().hex
        now_ms = to_ms(self._clock.now())
        token, expires_at = self._tokens.issue_session(user_id, session_id)
        session = Session(session_id, user_id, label, now_ms, expires_at * 1000, None)

        def change(tx: Tx) -> None:
            repo.purge_expired(tx, now_ms)
            repo.create(tx, session)

        await self._db.write(change)
        return IssuedSession(token, expires_at, session)

    async def active(self, claims: Claims) -> bool:
        """Whether a session token's session still stands (tokens without one: yes)."""
        session_id = claims.session_id
        if session_id is None:
            return True
        found = await self._cache.get(session_id, lambda: self._db.read(lambda tx: repo.get(tx, session_id)))
        return found is not None and found.user_id == claims.user_id and found.active(to_ms(self._clock.now()))

    async def of_user(self, user_id: str) -> list[Session]:
        now_ms = to_ms(self._clock.now())
        return await self._db.read(lambda tx: repo.active_of_user(tx, user_id, now_ms))

    async def revoke(self, user_id: str, session_id: str) -> bool:
        """Revoke one of the user's sessions; False when unknown, someone else's, or over."""

        def change(tx: Tx, emitter: Emitter) -> bool:
            done = repo.revoke(tx, session_id, user_id, emitter.now_ms)
            if done:
                emitter.emit(user_id, SESSION_REVOKED, {"userId": user_id, "sessionId": session_id})
            return done

        try:
            return await self._publisher.write(change)
        finally:
            self._forget(session_id)

    def _forget(self, session_id: str) -> None:
        self._cache.forget(session_id)

    def on_event(self, event: Event) -> None:
        """A session revoked anywhere (another process: through the bus relay) leaves this
        process's cache at once."""
        if event.name == SESSION_REVOKED:
            session_id = event.data.get("sessionId")
            if isinstance(session_id, str):
                self._forget(session_id)


def build_sessions(
    database: Database, publisher: EventPublisher, clock: Clock, tokens: TokenService, cache_seconds: float
) -> Sessions:
    """The service, listening on the bus for revocations made by other processes."""
    service = Sessions(database, publisher, clock, tokens, cache_seconds)
    publisher.bus.subscribe(service.on_event)
    return service
