"""Password hashing with argon2id, off the Trio thread (a hash costs tens of milliseconds)."""

from __future__ import annotations

import base64
import secrets

import trio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from argon2.low_level import ARGON2_VERSION


class PasswordWorkBusy(Exception):
    """Every hashing slot is busy and the queue is full: answer 503 rather than queue
    without bound (a flood of logins would otherwise delay everyone's by seconds)."""


class Passwords:
    def __init__(self, time_cost: int, memory_kib: int, parallel_hashes: int = 2, max_waiting: int = 32) -> None:
        self._hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=1)
        # Bounds memory: each hash in flight holds memory_kib.
        self._limiter = trio.CapacityLimiter(parallel_hashes)
        self._max_waiting = max_waiting
        self._dummy = unmatchable_hash(self._hasher)

    def _admit(self) -> None:
        if self._limiter.available_tokens == 0 and self._limiter.statistics().tasks_waiting >= self._max_waiting:
            raise PasswordWorkBusy()

    async def hash(self, password: str) -> str:
        self._admit()
        return await trio.to_thread.run_sync(self._hasher.hash, password, limiter=self._limiter)

    async def verify(self, password_hash: str | None, password: str) -> bool:
        """False for a wrong password; an unknown user costs the same time as a known one."""
        target = password_hash or self._dummy

        def check() -> bool:
            try:
                return self._hasher.verify(target, password) and password_hash is not None
            except (VerificationError, InvalidHashError):
                return False

        self._admit()
        return await trio.to_thread.run_sync(check, limiter=self._limiter)


def unmatchable_hash(hasher: PasswordHasher) -> str:
    """A hash in `hasher`'s format and parameters that no password matches (a random salt
    and digest): verifying an unknown user's password against it costs what verifying
    against a real hash does. Made without hashing: a real hash made at start cost every
    server process a full argon2 run on the event loop (eight at once when `serve
    --workers 8` starts)."""

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode().rstrip("=")

    params = f"m={hasher.memory_cost},t={hasher.time_cost},p={hasher.parallelism}"
    salt, digest = secrets.token_bytes(hasher.salt_len), secrets.token_bytes(hasher.hash_len)
    return f"$argon2{hasher.type.name.lower()}$v={ARGON2_VERSION}${params}${b64(salt)}${b64(digest)}"
