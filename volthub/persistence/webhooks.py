"""App webhooks and their deliveries: the outbox (pending rows) and the delivery log.

A delivery row is written in the transaction of the change that caused its event, claimed
by a worker with a lease (`claimed_until`), and finished by recording an attempt. The
policy (schedule, disabling, the per-app cap) lives in `volthub.services.webhooks`; these are
its primitives.

One module on purpose: the webhook record, the cap counter, the outbox claim/lease/attempt
cycle and the delivery log share one set of tables and row shapes, and their SQL is easier
to keep consistent side by side than split across modules that import each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson

from volthub.persistence.database import Row, Tx
from volthub.persistence.pagination import encode_cursor, newest_first
from volthub.persistence.records import Record, optional_int, read

PENDING = "pending"
SUCCEEDED = "succeeded"
FAILED = "failed"

# Why a webhook is disabled.
BY_OWNER = "owner"
BY_FAILURES = "failures"
BY_GONE = "gone"

_DELIVERY_COLUMNS = (
    "id, webhook_id, event_id, event_name, body, state, failed_attempts, attempt_count,"
    " next_attempt_at, redelivery_of, created_at, updated_at, completed_at"
)


@dataclass(frozen=True)
class Webhook(Record):
    id: str
    client_id: str
    url: str
    events: list[str]
    secret: str
    enabled: bool
    disabled_reason: str | None
    consecutive_failures: int
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class Subscriber:
    """An enabled webhook of an app owned by `owner_id` (whose channel it follows)."""

    webhook_id: str
    client_id: str
    owner_id: str
    events: list[str]


@dataclass(frozen=True)
class NewDelivery:
    id: str
    webhook_id: str
    event_id: str
    event_name: str
    body: bytes
    due_at: int
    redelivery_of: str | None = None


@dataclass(frozen=True)
class Claim:
    """A delivery a worker holds until `claimed_until`; `token` proves the claim is its own."""

    delivery_id: str
    webhook_id: str
    client_id: str
    url: str
    secret: str
    event_id: str
    event_name: str
    body: bytes
    failed_attempts: int
    token: str


@dataclass(frozen=True)
class Attempt(Record):
    number: int
    attempted_at: int
    outcome: str  # "success" | "failure" | "gone"
    status_code: int | None
    latency_ms: int
    error: str | None


@dataclass(frozen=True)
class Delivery(Record):
    id: str
    webhook_id: str
    event_id: str
    event_name: str
    body: bytes
    state: str
    failed_attempts: int
    attempt_count: int
    next_attempt_at: int | None
    redelivery_of: str | None
    created_at: int
    updated_at: int
    completed_at: int | None
    attempts: tuple[Attempt, ...] = ()

    @classmethod
    def from_row(cls, row: Row, attempts: Sequence[Attempt] = ()) -> Delivery:
        return read(cls, row, body=row["body"].encode("utf-8"), attempts=tuple(attempts))


@dataclass(frozen=True)
class DeliveryPage:
    items: list[Delivery]
    next_cursor: str | None


# --------------------------------------------------------------------------- webhooks


class WebhookLimitReached(Exception):
    """The app already has as many webhooks as the cap allows."""


def create_webhook(
    tx: Tx,
    *,
    webhook_id: str,
    client_id: str,
    url: str,
    events: list[str],
    secret: str,
    now_ms: int,
    max_per_app: int | None = None,
) -> Webhook:
    """Insert a webhook and count it on its app row (`apps.webhook_count`).

    With `max_per_app`, the count is raised only while below it (a guarded UPDATE that
    PostgreSQL re-checks after waiting on the row's lock), else `WebhookLimitReached`: so
    concurrent creates cannot exceed the cap. Call it inside the transaction that also
    checked the app: the row stays locked until commit.
    """
    guard: str = ""
    params: list[object] = [client_id]
    if max_per_app is not None:
        guard, params = " AND webhook_count < ?", [client_id, max_per_app]
    counted = tx.execute(
        f"UPDATE apps SET webhook_count = webhook_count + 1 WHERE client_id = ?{guard} RETURNING webhook_count",
        tuple(params),
    )
    if not counted and max_per_app is not None:
        raise WebhookLimitReached(client_id)
    tx.execute(
        "INSERT INTO webhooks (id, client_id, url, events, secret, enabled, disabled_reason,"
        " consecutive_failures, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, NULL, 0, ?, ?)",
        (webhook_id, client_id, url, orjson.dumps(events).decode(), secret, True, now_ms, now_ms),
    )
    return Webhook(webhook_id, client_id, url, list(events), secret, True, None, 0, now_ms, now_ms)


def count_for_app(tx: Tx, client_id: str) -> int:
    return int(tx.scalar("SELECT COUNT(*) AS n FROM webhooks WHERE client_id = ?", (client_id,)))


def list_for_app(tx: Tx, client_id: str) -> list[Webhook]:
    rows = tx.execute(
        f"SELECT {Webhook.columns()} FROM webhooks WHERE client_id = ? ORDER BY created_at, id",
        (client_id,),
    )
    return [Webhook.from_row(row) for row in rows]


def get_webhook(tx: Tx, client_id: str, webhook_id: str) -> Webhook | None:
    row = tx.one(
        f"SELECT {Webhook.columns()} FROM webhooks WHERE id = ? AND client_id = ?",
        (webhook_id, client_id),
    )
    return Webhook.from_row(row) if row else None


def get_webhook_by_id(tx: Tx, webhook_id: str) -> Webhook | None:
    return Webhook.fetch_one(tx, f"SELECT {Webhook.columns()} FROM webhooks WHERE id = ?", (webhook_id,))


def change_webhook(
    tx: Tx, webhook_id: str, now_ms: int, *, url: str | None = None, events: list[str] | None = None
) -> None:
    sets, params = ["updated_at = ?"], [now_ms]
    if url is not None:
        sets.append("url = ?")
        params.append(url)  # type: ignore[arg-type]
    if events is not None:
        sets.append("events = ?")
        params.append(orjson.dumps(events).decode())  # type: ignore[arg-type]
    tx.execute(f"UPDATE webhooks SET {', '.join(sets)} WHERE id = ?", (*params, webhook_id))


def enable_webhook(tx: Tx, webhook_id: str, now_ms: int) -> int:
    """Re-enable: reset the failure count and give parked deliveries a fresh schedule,
    due now (one still leased to a worker: when its lease ends). Returns how many resume."""
    tx.execute(
        "UPDATE webhooks SET enabled = ?, disabled_reason = NULL, consecutive_failures = 0,"
        " updated_at = ? WHERE id = ?",
        (True, now_ms, webhook_id),
    )
    rows = tx.execute(
        "UPDATE webhook_deliveries SET failed_attempts = 0, updated_at = ?, next_attempt_at ="
        " CASE WHEN claimed_until IS NOT NULL AND claimed_until > ? THEN claimed_until ELSE ? END"
        " WHERE webhook_id = ? AND state = ? RETURNING id",
        (now_ms, now_ms, now_ms, webhook_id, PENDING),
    )
    return len(rows)


def disable_webhook(tx: Tx, webhook_id: str, reason: str, now_ms: int) -> bool:
    """Disable; True when it was enabled. Pending deliveries stay, parked (no due time, so
    no claim or wake-up ever looks at them), until the webhook is re-enabled."""
    rows = tx.execute(
        "UPDATE webhooks SET enabled = ?, disabled_reason = ?, updated_at = ?"
        " WHERE id = ? AND enabled = ? RETURNING id",
        (False, reason, now_ms, webhook_id, True),
    )
    if rows:
        tx.execute(
            "UPDATE webhook_deliveries SET next_attempt_at = NULL WHERE webhook_id = ? AND state = ?",
            (webhook_id, PENDING),
        )
    return bool(rows)


def set_secret(tx: Tx, webhook_id: str, secret: str, now_ms: int) -> None:
    tx.execute("UPDATE webhooks SET secret = ?, updated_at = ? WHERE id = ?", (secret, now_ms, webhook_id))


def delete_webhook(tx: Tx, client_id: str, webhook_id: str) -> bool:
    if tx.dialect == "postgresql":
        # The owner's channel position row first, as publishing transactions take it: one of
        # them may hold it and be about to reference this webhook in a delivery row, which
        # would wait on the row this DELETE locks (a deadlock; the trigger that moves the
        # subscriptions version runs only once the webhook row is locked). An upsert, so that
        # it also waits for a channel's first event, whose row is not committed yet.
        tx.execute(
            "INSERT INTO event_channel_positions (channel_id, seq) SELECT owner_id, 0 FROM apps WHERE client_id = ?"
            " ON CONFLICT (channel_id) DO UPDATE SET webhooks_version = nextval('webhooks_versions')",
            (client_id,),
        )
    rows = tx.execute("DELETE FROM webhooks WHERE id = ? AND client_id = ? RETURNING id", (webhook_id, client_id))
    if rows:
        tx.execute("UPDATE apps SET webhook_count = webhook_count - 1 WHERE client_id = ?", (client_id,))
    return bool(rows)


def record_webhook_result(tx: Tx, webhook_id: str, success: bool) -> int:
    """Count a failed attempt (or reset the count on success); returns the new count."""
    if success:  # conditional: no write (and no row lock) in the common case
        tx.execute(
            "UPDATE webhooks SET consecutive_failures = 0 WHERE id = ? AND consecutive_failures <> 0",
            (webhook_id,),
        )
        return 0
    value = tx.scalar(
        "UPDATE webhooks SET consecutive_failures = consecutive_failures + 1 WHERE id = ?"
        " RETURNING consecutive_failures",
        (webhook_id,),
    )
    return 0 if value is None else int(value)


# --------------------------------------------------------------------------- outbox


def subscribers(tx: Tx, channel_ids: Iterable[str]) -> list[Subscriber]:
    """Enabled webhooks of apps owned by these users: a webhook follows its owner's channel."""
    owners = sorted(set(channel_ids))
    if not owners:
        return []
    marks = ", ".join("?" for _ in owners)
    rows = tx.execute(
        "SELECT w.id, w.client_id, w.events, a.owner_id FROM webhooks w"
        f" JOIN apps a ON a.client_id = w.client_id WHERE a.owner_id IN ({marks}) AND w.enabled = ?",
        (*owners, True),
    )
    return [read(Subscriber, row, webhook_id=row["id"]) for row in rows]


def enqueue(tx: Tx, deliveries: Sequence[NewDelivery], now_ms: int) -> None:
    if not deliveries:
        return
    tx.execute_many(
        "INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_name, body, state,"
        " failed_attempts, attempt_count, next_attempt_at, claimed_until, claim_token,"
        " redelivery_of, created_at, updated_at, completed_at)"
        " VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?, NULL, NULL, ?, ?, ?, NULL)",
        [
            (
                d.id,
                d.webhook_id,
                d.event_id,
                d.event_name,
                d.body.decode("utf-8"),
                PENDING,
                d.due_at,
                d.redelivery_of,
                now_ms,
                now_ms,
            )
            for d in deliveries
        ],
    )


def claim_due(tx: Tx, now_ms: int, lease_until_ms: int, limit: int, token: str) -> list[Claim]:
    """Claim up to `limit` due deliveries of enabled webhooks, oldest due first.

    The lease is the row's due time while it is held: a crashed worker's claim simply
    falls due again when the lease ends. PostgreSQL skips rows another transaction is
    claiming (SKIP LOCKED); on SQLite the single writer serialises claims.
    """
    lock = " FOR UPDATE OF d SKIP LOCKED" if tx.dialect == "postgresql" else ""
    rows = tx.execute(
        "SELECT d.id, d.webhook_id, d.event_id, d.event_name, d.body, d.failed_attempts,"
        " w.client_id, w.url, w.secret FROM webhook_deliveries d"
        " JOIN webhooks w ON w.id = d.webhook_id"
        " WHERE d.state = ? AND d.next_attempt_at <= ? AND w.enabled = ?"
        f" ORDER BY d.next_attempt_at LIMIT ?{lock}",  # index order: no sort of the backlog
        (PENDING, now_ms, True, limit),
    )
    if not rows:
        return []
    ids = [row["id"] for row in rows]
    marks = ", ".join("?" for _ in ids)
    tx.execute(
        f"UPDATE webhook_deliveries SET next_attempt_at = ?, claimed_until = ?, claim_token = ? WHERE id IN ({marks})",
        (lease_until_ms, lease_until_ms, token, *ids),
    )
    return [read(Claim, row, delivery_id=row["id"], body=row["body"].encode("utf-8"), token=token) for row in rows]


def outbox_summary(tx: Tx) -> tuple[int, int | None]:
    """(deliveries waiting to be attempted, the oldest one's created_at in ms or None)."""
    row = tx.one(
        "SELECT COUNT(*) AS pending, MIN(created_at) AS oldest FROM webhook_deliveries"
        " WHERE state = ? AND next_attempt_at IS NOT NULL",
        (PENDING,),
    )
    if row is None:
        return 0, None
    return int(row["pending"]), optional_int(row["oldest"])


def next_due_at(tx: Tx) -> int | None:
    """When the next pending delivery of an enabled webhook falls due (ms): the first
    index entry that belongs to an enabled webhook (parked rows have no due time)."""
    value = tx.scalar(
        "SELECT d.next_attempt_at FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id"
        " WHERE d.state = ? AND d.next_attempt_at IS NOT NULL AND w.enabled = ?"
        " ORDER BY d.next_attempt_at LIMIT 1",
        (PENDING, True),
    )
    return optional_int(value)


def start_recording(tx: Tx, delivery_id: str, token: str) -> tuple[int, bool, int] | None:
    """Number the attempt and lock the row: (number, claim still ours, failed attempts so
    far), or None when the delivery is gone.

    A worker whose lease lapsed and was taken over still logs its attempt, but must not
    move the delivery's state: the worker now holding it does.
    """
    row = tx.one(
        "UPDATE webhook_deliveries SET attempt_count = attempt_count + 1 WHERE id = ?"
        " RETURNING attempt_count, claim_token, state, failed_attempts",
        (delivery_id,),
    )
    if row is None:
        return None
    ours = row["claim_token"] == token and row["state"] == PENDING
    return int(row["attempt_count"]), ours, int(row["failed_attempts"])


def insert_attempt(tx: Tx, delivery_id: str, attempt: Attempt) -> None:
    tx.execute(
        "INSERT INTO webhook_attempts (delivery_id, number, attempted_at, outcome, status_code,"
        " latency_ms, error) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            delivery_id,
            attempt.number,
            attempt.attempted_at,
            attempt.outcome,
            attempt.status_code,
            attempt.latency_ms,
            attempt.error,
        ),
    )


def finish_delivery(tx: Tx, delivery_id: str, state: str, failed_attempts: int, now_ms: int) -> None:
    tx.execute(
        "UPDATE webhook_deliveries SET state = ?, failed_attempts = ?, next_attempt_at = NULL,"
        " claimed_until = NULL, claim_token = NULL, updated_at = ?, completed_at = ? WHERE id = ?",
        (state, failed_attempts, now_ms, now_ms, delivery_id),
    )


def reschedule_delivery(tx: Tx, delivery_id: str, failed_attempts: int, due_at: int, now_ms: int) -> None:
    """Due again at `due_at`, or parked (no due time) if its webhook is disabled by now."""
    tx.execute(
        "UPDATE webhook_deliveries SET failed_attempts = ?, claimed_until = NULL, claim_token = NULL,"
        " updated_at = ?, next_attempt_at = (SELECT CASE WHEN w.enabled THEN ? ELSE NULL END"
        " FROM webhooks w WHERE w.id = webhook_deliveries.webhook_id) WHERE id = ?",
        (failed_attempts, now_ms, due_at, delivery_id),
    )


def release_claim(tx: Tx, delivery_id: str, token: str, now_ms: int) -> None:
    """Give a claim back, due now (the worker is shutting down mid-attempt)."""
    tx.execute(
        "UPDATE webhook_deliveries SET claimed_until = NULL, claim_token = NULL, next_attempt_at ="
        " CASE WHEN next_attempt_at IS NULL THEN NULL ELSE ? END WHERE id = ? AND claim_token = ?",
        (now_ms, delivery_id, token),
    )


def prune_finished(tx: Tx, before_ms: int, limit: int = 1000) -> int:
    """Delete up to `limit` finished deliveries completed before `before_ms`."""
    rows = tx.execute(
        "SELECT id FROM webhook_deliveries WHERE completed_at IS NOT NULL AND completed_at < ?"
        " ORDER BY completed_at LIMIT ?",
        (before_ms, limit),
    )
    ids = [row["id"] for row in rows]
    if ids:
        marks = ", ".join("?" for _ in ids)
        tx.execute(f"DELETE FROM webhook_attempts WHERE delivery_id IN ({marks})", ids)
        tx.execute(f"DELETE FROM webhook_deliveries WHERE id IN ({marks})", ids)
    return len(ids)


# --------------------------------------------------------------------------- delivery log


def get_delivery(tx: Tx, webhook_id: str, delivery_id: str) -> Delivery | None:
    row = tx.one(
        f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = ? AND webhook_id = ?",
        (delivery_id, webhook_id),
    )
    if row is None:
        return None
    return Delivery.from_row(row, _attempts_of(tx, [delivery_id]).get(delivery_id, []))


def list_deliveries(tx: Tx, webhook_id: str, limit: int, cursor: str | None) -> DeliveryPage:
    """Newest first, each with its attempts; keyset cursor on (created_at, id)."""
    select = f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = ?"
    rows, more = newest_first(tx, select, [webhook_id], limit, cursor or None, at="created_at", key="id")
    attempts = _attempts_of(tx, [row["id"] for row in rows])
    items = [Delivery.from_row(row, attempts.get(row["id"], [])) for row in rows]
    next_cursor = encode_cursor(int(rows[-1]["created_at"]), rows[-1]["id"]) if more else None
    return DeliveryPage(items, next_cursor)


def _attempts_of(tx: Tx, delivery_ids: list[str]) -> dict[str, list[Attempt]]:
    if not delivery_ids:
        return {}
    marks = ", ".join("?" for _ in delivery_ids)
    rows = tx.execute(
        "SELECT delivery_id, number, attempted_at, outcome, status_code, latency_ms, error"
        f" FROM webhook_attempts WHERE delivery_id IN ({marks}) ORDER BY delivery_id, number",
        delivery_ids,
    )
    found: dict[str, list[Attempt]] = {}
    for row in rows:
        found.setdefault(row["delivery_id"], []).append(Attempt.from_row(row))
    return found
