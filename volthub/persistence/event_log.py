"""The event log and LISTEN/NOTIFY of the PostgreSQL bus relay.

`append` runs inside the transaction that publishes events: it hands each event the next
position of its channel (`seq`, ordered per channel across processes), writes it to
`event_log` and queues a NOTIFY that PostgreSQL sends at commit (and drops on rollback). A
payload too large for NOTIFY (8000 bytes) is sent as a reference to its row.

`listen` is the blocking side: one dedicated connection in one thread, which hands every
notification payload to a callback. The other functions read the log back: replay after a
lost connection, a channel's missing range, the tail for a process that just started.

The NOTIFY channel is named after the connection's schema, so deployments (or tests) that
share one database in different schemas never hear each other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from volthub.persistence.database import Tx
from volthub.persistence.records import Record

# NOTIFY refuses payloads of 8000 bytes or more; stay clear of it.
MAX_INLINE_PAYLOAD = 7800
_CHANNEL_SQL = "left('volthub_ev_' || current_schema(), 63)"


@dataclass(frozen=True, slots=True)
class NewEntry:
    channel_id: str
    event_id: str
    name: str
    body: dict[str, Any]  # everything else the event carries (data, timestamp, ...)


@dataclass(frozen=True, slots=True)
class LoggedEvent(Record):
    pos: int  # global position in the log (insertion order, not commit order)
    channel_id: str
    seq: int  # position within the channel: commit order
    event_id: str
    name: str
    body: dict[str, Any]
    created_at: int
    # The channel owner's webhook subscriptions version when the event was appended (what
    # `append` returns; None when read back): a subscribers read stays good while it stands.
    webhooks_version: int | None = None


@dataclass(frozen=True, slots=True)
class TransientEvent:
    """A test event: relayed to every process by NOTIFY alone, never written to the log."""

    channel_id: str
    event_id: str
    name: str
    body: dict[str, Any]


def notify_transient(tx: Tx, entry: NewEntry) -> bool:
    """NOTIFY `entry` at commit without logging it; False when it is too large for NOTIFY
    (a test event is small: the caller drops it rather than store it)."""
    payload = orjson.dumps({"u": 1, "c": entry.channel_id, "i": entry.event_id, "n": entry.name, "b": entry.body})
    if len(payload) > MAX_INLINE_PAYLOAD:
        return False
    tx.scalar(f"SELECT pg_notify({_CHANNEL_SQL}, ?)", (payload.decode(),))
    return True


def append(tx: Tx, entries: Sequence[NewEntry], now_ms: int, *, notify: bool = True) -> list[LoggedEvent]:
    """Log `entries` in this transaction and NOTIFY them at commit (unless `notify` is
    False: another broker carries them after commit); returns them stamped."""
    if notify and len(entries) == 1:
        return [_append_one(tx, entries[0], now_ms)]
    if notify and entries and all(entry.channel_id == entries[0].channel_id for entry in entries):
        return _append_to_one_channel(tx, entries, now_ms)
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry.channel_id] = counts.get(entry.channel_id, 0) + 1
    next_seq: dict[str, int] = {}
    versions: dict[str, int] = {}
    # Sorted: two transactions touching the same channels lock them in the same order.
    for channel_id in sorted(counts):
        position = tx.one(
            "INSERT INTO event_channel_positions (channel_id, seq) VALUES (?, ?)"
            " ON CONFLICT (channel_id) DO UPDATE SET seq = event_channel_positions.seq + EXCLUDED.seq"
            " RETURNING seq, webhooks_version",
            (channel_id, counts[channel_id]),
        )
        assert position is not None
        next_seq[channel_id] = int(position["seq"]) - counts[channel_id] + 1
        versions[channel_id] = int(position["webhooks_version"])
    logged = []
    for entry in entries:
        seq = next_seq[entry.channel_id]
        next_seq[entry.channel_id] = seq + 1
        body = orjson.dumps(entry.body).decode()
        if not notify:
            pos = tx.scalar(
                "INSERT INTO event_log (channel_id, seq, event_id, name, body, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING pos",
                (entry.channel_id, seq, entry.event_id, entry.name, body, now_ms),
            )
            logged.append(_stamped(int(pos), entry, seq, now_ms, versions[entry.channel_id]))
            continue
        # One round trip per event: the row, and its NOTIFY, whose payload needs the row's
        # position (spliced in by PostgreSQL in front of the rest, `payload_tail`).
        pos = tx.scalar(
            "WITH logged AS (INSERT INTO event_log (channel_id, seq, event_id, name, body, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING pos)"
            f" SELECT pos, pg_notify({_CHANNEL_SQL}, '{{\"p\":' || pos || ?) FROM logged",
            (
                entry.channel_id,
                seq,
                entry.event_id,
                entry.name,
                body,
                now_ms,
                payload_tail(entry.channel_id, seq, entry.event_id, entry.name, now_ms, body),
            ),
        )
        logged.append(_stamped(int(pos), entry, seq, now_ms, versions[entry.channel_id]))
    return logged


def _append_one(tx: Tx, entry: NewEntry, now_ms: int) -> LoggedEvent:
    """The usual transaction, one event: its channel position, its row and its NOTIFY in
    one round trip (PostgreSQL splices the position and the seq into the payload)."""
    body = orjson.dumps(entry.body).decode()
    row = tx.one(
        "WITH position AS (INSERT INTO event_channel_positions (channel_id, seq) VALUES (?, 1)"
        " ON CONFLICT (channel_id) DO UPDATE SET seq = event_channel_positions.seq + 1 RETURNING seq, webhooks_version),"
        " logged AS (INSERT INTO event_log (channel_id, seq, event_id, name, body, created_at)"
        " SELECT ?, seq, ?, ?, ?, ? FROM position RETURNING pos, seq)"
        " SELECT logged.pos, logged.seq, position.webhooks_version,"
        f" pg_notify({_CHANNEL_SQL}, '{{\"p\":' || logged.pos || ',\"s\":' || logged.seq || ?) FROM logged, position",
        (
            entry.channel_id,
            entry.channel_id,
            entry.event_id,
            entry.name,
            body,
            now_ms,
            payload_tail(entry.channel_id, None, entry.event_id, entry.name, now_ms, body),
        ),
    )
    assert row is not None
    return _stamped(int(row["pos"]), entry, int(row["seq"]), now_ms, int(row["webhooks_version"]))


def _append_to_one_channel(tx: Tx, entries: Sequence[NewEntry], now_ms: int) -> list[LoggedEvent]:
    """Events of one channel (an actor's batch): the channel's positions, the rows and their
    NOTIFYs, in seq order, in one round trip instead of one per event (the same client CPU,
    measured, and a shorter transaction). PostgreSQL splices each row's position and seq in
    front of its payload's tail."""
    channel_id = entries[0].channel_id
    bodies = [orjson.dumps(entry.body).decode() for entry in entries]
    tails = [
        payload_tail(channel_id, None, entry.event_id, entry.name, now_ms, body)
        for entry, body in zip(entries, bodies, strict=True)
    ]
    count = len(entries)
    rows = tx.execute(
        "WITH position AS (INSERT INTO event_channel_positions (channel_id, seq) VALUES (?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET seq = event_channel_positions.seq + EXCLUDED.seq"
        " RETURNING seq, webhooks_version),"
        " entries AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]) WITH ORDINALITY AS e(event_id, name, body, n)),"
        " logged AS (INSERT INTO event_log (channel_id, seq, event_id, name, body, created_at)"
        " SELECT ?, position.seq - ? + e.n, e.event_id, e.name, e.body, ? FROM position, entries e RETURNING pos, seq)"
        # A sorted subquery is not flattened: the NOTIFYs are sent in seq order.
        " SELECT pos, seq, webhooks_version,"
        f" pg_notify({_CHANNEL_SQL}, '{{\"p\":' || pos || ',\"s\":' || seq || (?::text[])[i])"
        " FROM (SELECT logged.pos, logged.seq, position.webhooks_version, logged.seq - position.seq + ? AS i"
        " FROM logged, position ORDER BY logged.seq) AS ordered",
        (
            channel_id,
            count,
            [entry.event_id for entry in entries],
            [entry.name for entry in entries],
            bodies,
            channel_id,
            count,
            now_ms,
            tails,
            count,
        ),
    )
    by_seq = sorted((int(row["seq"]), int(row["pos"]), int(row["webhooks_version"])) for row in rows)
    return [
        _stamped(pos, entry, seq, now_ms, version) for (seq, pos, version), entry in zip(by_seq, entries, strict=True)
    ]


def _stamped(pos: int, entry: NewEntry, seq: int, now_ms: int, webhooks_version: int) -> LoggedEvent:
    return LoggedEvent(pos, entry.channel_id, seq, entry.event_id, entry.name, entry.body, now_ms, webhooks_version)


def payload_tail(channel_id: str, seq: int | None, event_id: str, name: str, created_at: int, body_json: str) -> str:
    """The NOTIFY payload after `{"p":<pos>` (and `,"s":<seq>` when `seq` is None: spliced
    in by PostgreSQL too): the whole event, or `,"r":1}` (a reference to the row) when the
    event would not fit in NOTIFY's limit."""
    fields: dict[str, Any] = {"c": channel_id} if seq is None else {"c": channel_id, "s": seq}
    head = orjson.dumps({**fields, "i": event_id, "n": name, "t": created_at}).decode()
    tail = f',{head[1:-1]},"b":{body_json}}}'
    if len(tail.encode()) + 64 <= MAX_INLINE_PAYLOAD:  # 64: room for the position and the seq
        return tail
    return ',"r":1}'


def notification(item: LoggedEvent, body_json: str) -> str:
    """The NOTIFY payload of a logged event (what `append` has PostgreSQL send)."""
    tail = payload_tail(item.channel_id, item.seq, item.event_id, item.name, item.created_at, body_json)
    return f'{{"p":{item.pos}{tail}'


def parse_notification(payload: str) -> LoggedEvent | TransientEvent | int:
    """A logged event, a transient (test) event, or the position of the row to read when the
    payload is a reference."""
    document = orjson.loads(payload)
    if document.get("u"):
        return TransientEvent(document["c"], document["i"], document["n"], document["b"])
    if document.get("r"):
        return int(document["p"])
    return LoggedEvent(
        document["p"], document["c"], document["s"], document["i"], document["n"], document["b"], document["t"]
    )


_COLUMNS = "pos, channel_id, seq, event_id, name, body, created_at"


def by_position(tx: Tx, pos: int) -> LoggedEvent | None:
    return LoggedEvent.fetch_one(tx, f"SELECT {_COLUMNS} FROM event_log WHERE pos = ?", (pos,))


def after(tx: Tx, pos: int, since_ms: int, limit: int) -> list[LoggedEvent]:
    """Rows past `pos`, or written since `since_ms` (a position is taken at insert but
    becomes visible at commit, so a smaller one can appear late): what a reconnecting
    relay replays. The caller drops what it already has by per-channel `seq`."""
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM event_log WHERE pos > ? OR created_at >= ? ORDER BY pos LIMIT ?",
        (pos, since_ms, limit),
    )
    return [LoggedEvent.from_row(row) for row in rows]


def channel_range(tx: Tx, channel_id: str, after_seq: int, before_seq: int) -> list[LoggedEvent]:
    """A channel's events with after_seq < seq < before_seq, in order."""
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM event_log WHERE channel_id = ? AND seq > ? AND seq < ? ORDER BY seq",
        (channel_id, after_seq, before_seq),
    )
    return [LoggedEvent.from_row(row) for row in rows]


def channel_after(tx: Tx, channel_id: str, after_seq: int, limit: int) -> list[LoggedEvent]:
    """At most `limit` of a channel's events past `after_seq`, in order (a bounded read)."""
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM event_log WHERE channel_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (channel_id, after_seq, limit),
    )
    return [LoggedEvent.from_row(row) for row in rows]


def channel_position(tx: Tx, channel_id: str) -> int:
    """The position of the channel's newest committed event (0: none yet)."""
    return int(tx.scalar("SELECT seq FROM event_channel_positions WHERE channel_id = ?", (channel_id,)) or 0)


def tail(tx: Tx, since_ms: int, limit: int) -> list[LoggedEvent]:
    """The newest `limit` rows written since `since_ms`, oldest first (a process's warm start)."""
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM event_log WHERE created_at >= ? ORDER BY pos DESC LIMIT ?", (since_ms, limit)
    )
    return [LoggedEvent.from_row(row) for row in reversed(rows)]


def last_position(tx: Tx) -> int:
    return int(tx.scalar("SELECT COALESCE(MAX(pos), 0) AS pos FROM event_log") or 0)


def prune(tx: Tx, before_ms: int, batch: int = 10_000) -> int:
    """Delete up to `batch` rows older than `before_ms`; returns how many went."""
    rows = tx.execute(
        "DELETE FROM event_log WHERE pos IN (SELECT pos FROM event_log WHERE created_at < ? ORDER BY pos LIMIT ?)"
        " RETURNING pos",
        (before_ms, batch),
    )
    return len(rows)


# --- the listening connection (blocking: run it in its own thread) ---------------------------


def listen(
    url: str,
    on_payload: Callable[[str], None],
    on_listening: Callable[[int], None],
    stop: threading.Event,
    *,
    check_every: float = 5.0,
) -> None:
    """LISTEN on a connection of its own and hand every payload to `on_payload`, until
    `stop` is set. Returns nothing on stop; raises when the connection is lost.

    `on_listening(backend_pid)` is called once LISTEN is in effect: every event committed
    after that is heard. An idle connection is checked every `check_every` seconds, so a server that went
    away silently is noticed (and the caller reconnects and replays).
    """
    import time

    import psycopg
    from psycopg import sql

    with psycopg.connect(
        url,
        autocommit=True,
        connect_timeout=10,
        keepalives=1,
        keepalives_idle=10,
        keepalives_interval=5,
        application_name="volthub event relay",
    ) as connection:
        row = connection.execute(f"SELECT {_CHANNEL_SQL}").fetchone()
        assert row is not None
        connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(row[0])))
        on_listening(connection.info.backend_pid)
        checked = time.monotonic()
        while not stop.is_set():
            # Short waits: `stop` is looked at twice a second.
            for notify in connection.notifies(timeout=0.5):
                checked = time.monotonic()  # the connection is evidently alive
                on_payload(notify.payload)
                if stop.is_set():
                    return
            if time.monotonic() - checked >= check_every:
                connection.execute("SELECT 1")  # raises if the server is gone
                checked = time.monotonic()


def channel_positions(tx: Tx, channel_ids: Sequence[str]) -> dict[str, int]:
    """The positions of the newest committed events of `channel_ids` (absent: none yet)."""
    if not channel_ids:
        return {}
    marks = ", ".join("?" * len(channel_ids))
    rows = tx.execute(
        f"SELECT channel_id, seq FROM event_channel_positions WHERE channel_id IN ({marks})", tuple(channel_ids)
    )
    return {str(row["channel_id"]): int(row["seq"]) for row in rows}
