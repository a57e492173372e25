"""Idempotency-Key for money-moving POSTs.

Scoped to the user and the route. The first request claims the key in the database; its
answer is stored with the key, and a repeat gets those bytes back. A repeat that arrives
while the first is still running waits for its answer (woken at once in this process,
polling the database when the first runs in another one). The same key with another body is
refused (`KeyReused`). A request that fails with a server error gives its claim up so a
retry can run; one that dies with its process leaves the claim pending, and repeats are
answered `KeyInFlight` (409) rather than risking a second payment.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import trio

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database
from volthub.persistence import idempotency as repo

RETENTION_SECONDS = 24 * 3600
# How long a repeat waits for the first request's answer before giving up with 409.
WAIT_SECONDS = 30.0
POLL_SECONDS = 0.05


class KeyReused(Exception):
    """The key was used on this route with a different request body."""


class KeyInFlight(Exception):
    """The first request with this key has not answered (still running, or lost in a crash)."""


@dataclass(frozen=True)
class Claim:
    user_id: str
    route: str
    key: str
    token: str


@dataclass(frozen=True)
class Replay:
    status: int
    content_type: str
    body: str


class Idempotency:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock
        # Requests of this process still running, by (user, route, key): repeats wait here.
        self._running: dict[tuple[str, str, str], trio.Event] = {}

    async def begin(self, user_id: str, route: str, key: str, request_hash: str) -> Claim | Replay:
        """Own the key (Claim: run the request, then `finish` or `abandon`) or get its answer."""
        scope = (user_id, route, key)
        with trio.move_on_after(WAIT_SECONDS):
            while True:
                token = str(uuid.uuid4())
                now = to_ms(self._clock.now())
                record = await self._db.write(
                    lambda tx: repo.claim(
                        tx,
                        user_id=user_id,
                        route=route,
                        key=key,
                        request_hash=request_hash,
                        claim_token=token,
                        now_ms=now,
                        expired_before=now - RETENTION_SECONDS * 1000,
                    )
                )
                if record is None:
                    self._running[scope] = trio.Event()
                    return Claim(user_id, route, key, token)
                if record.request_hash != request_hash:
                    raise KeyReused(key)
                if record.state == "done":
                    assert record.response_status is not None
                    return Replay(record.response_status, record.response_type or "", record.response_body or "")
                await self._wait(scope)
        raise KeyInFlight(key)

    async def _wait(self, scope: tuple[str, str, str]) -> None:
        event = self._running.get(scope)
        with trio.move_on_after(POLL_SECONDS if event is None else WAIT_SECONDS):
            await (event.wait() if event is not None else trio.sleep_forever())

    async def finish(self, claim: Claim, status: int, content_type: str, body: str) -> None:
        try:
            await self._db.write(
                lambda tx: repo.answer(
                    tx,
                    user_id=claim.user_id,
                    route=claim.route,
                    key=claim.key,
                    claim_token=claim.token,
                    status=status,
                    content_type=content_type,
                    body=body,
                )
            )
        finally:
            self._wake(claim)

    async def abandon(self, claim: Claim) -> None:
        try:
            with trio.CancelScope(shield=True):
                await self._db.write(
                    lambda tx: repo.release(
                        tx, user_id=claim.user_id, route=claim.route, key=claim.key, claim_token=claim.token
                    )
                )
        finally:
            self._wake(claim)

    def _wake(self, claim: Claim) -> None:
        event = self._running.pop((claim.user_id, claim.route, claim.key), None)
        if event is not None:
            event.set()
