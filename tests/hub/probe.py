"""Test components for the actor loop: a durable countdown (a deadline that survives a
restart, written with a guard as polls and timers will be) and a probe whose commands
hold, fail or refuse on demand. Their state lives in a table the tests create."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from volthub.hub.components.base import Emitted, Outcome, Refusal, Refused
from volthub.hub.kinds import ComponentKind
from volthub.persistence import Tx

TABLE = (
    "CREATE TABLE IF NOT EXISTS test_countdowns ("
    " channel_id TEXT PRIMARY KEY, ends_at BIGINT NOT NULL, status TEXT NOT NULL)"
)


def create_table(tx: Tx) -> None:
    tx.execute(TABLE)


# --- the countdown: a deadline component ------------------------------------------------------


@dataclass(frozen=True)
class StartCountdown:
    seconds: int


@dataclass(frozen=True)
class OpenCountdown:
    ends_at: int


class CountdownStore:
    def __init__(self, tx: Tx, channel_id: str, now_ms: int) -> None:
        self._tx, self._channel_id = tx, channel_id

    def open_end(self) -> int | None:
        return self._tx.scalar(
            "SELECT ends_at FROM test_countdowns WHERE channel_id = ? AND status = 'open'", (self._channel_id,)
        )

    def finish(self) -> bool:
        """The guarded transition: only one process ever wins it."""
        rows = self._tx.execute(
            "UPDATE test_countdowns SET status = 'done' WHERE channel_id = ? AND status = 'open' RETURNING channel_id",
            (self._channel_id,),
        )
        return bool(rows)

    def apply(self, write: Any) -> None:
        assert isinstance(write, OpenCountdown)
        self._tx.execute("DELETE FROM test_countdowns WHERE channel_id = ?", (self._channel_id,))
        self._tx.execute(
            "INSERT INTO test_countdowns (channel_id, ends_at, status) VALUES (?, ?, 'open')",
            (self._channel_id, write.ends_at),
        )


class Countdown:
    def __init__(self, channel_id: str) -> None:
        self.ends_at: int | None = None

    def load(self, store: CountdownStore) -> None:
        self.ends_at = store.open_end()

    def handle(self, command: StartCountdown, now_ms: int, store: CountdownStore) -> Outcome:
        if self.ends_at is not None:
            raise Refused(Refusal(409, "countdown_running", "a countdown is running"))
        self.ends_at = now_ms + command.seconds * 1000
        return Outcome(self.ends_at, [OpenCountdown(self.ends_at)], shared_state_changed=True)

    def next_deadline(self) -> int | None:
        return self.ends_at

    def on_deadline(self, now_ms: int, store: CountdownStore) -> Outcome:
        self.ends_at = None
        if not store.finish():  # another process ended it first
            return Outcome()
        return Outcome(events=[Emitted("countdown.end", {"endedAt": now_ms})], shared_state_changed=True)

    def is_idle(self) -> bool:
        return self.ends_at is None


def open_countdowns(tx: Tx) -> list[str]:
    return [row["channel_id"] for row in tx.execute("SELECT channel_id FROM test_countdowns WHERE status = 'open'")]


COUNTDOWN = ComponentKind(
    name="countdown",
    commands=(StartCountdown,),
    create=Countdown,
    store=CountdownStore,
    open_deadlines=open_countdowns,
)


# --- the probe: commands that hold, fail or refuse ---------------------------------------------


@dataclass(frozen=True)
class Echo:
    value: Any


@dataclass(frozen=True)
class Hold:
    """Blocks in the actor's transaction (its worker thread) until `release` is set."""

    holding: threading.Event
    release: threading.Event


@dataclass(frozen=True)
class Refuse:
    code: str


@dataclass(frozen=True)
class Explode:
    """An unexpected error inside the transaction: the whole batch rolls back."""


class NoStore:
    def __init__(self, tx: Tx, channel_id: str, now_ms: int) -> None:
        pass

    def apply(self, write: Any) -> None:
        raise AssertionError("the probe writes nothing")


class Probe:
    def __init__(self, channel_id: str) -> None:
        self.handled: list[Any] = []
        self.loads = 0

    def load(self, store: NoStore) -> None:
        self.loads += 1

    def handle(self, command: Any, now_ms: int, store: NoStore) -> Outcome:
        if isinstance(command, Hold):
            command.holding.set()
            command.release.wait()
        elif isinstance(command, Refuse):
            raise Refused(Refusal(400, command.code, "refused on request"))
        elif isinstance(command, Explode):
            raise RuntimeError("boom")
        self.handled.append(command)
        return Outcome(command.value if isinstance(command, Echo) else "held")

    def next_deadline(self) -> int | None:
        return None

    def on_deadline(self, now_ms: int, store: NoStore) -> Outcome:
        return Outcome()

    def is_idle(self) -> bool:
        return True


PROBE = ComponentKind(name="probe", commands=(Echo, Hold, Refuse, Explode), create=Probe, store=NoStore)
