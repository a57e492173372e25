"""Interactive control: polls, predictions, giveaways, goals, timers.

Plain functions over a `Tx`, portable SQL, plain rows: the records belong to the
components in volthub.hub.components. Every deadline effect here is a guarded update
(`... WHERE status = 'open' RETURNING`), so two processes never both take the same step.
"""

from __future__ import annotations

from typing import Any

import orjson

from volthub.persistence.database import Row, Tx

# --- polls -----------------------------------------------------------------------------------

_POLL = "SELECT id, channel_id, title, options, status, started_at, ends_at, ended_at FROM polls"


def _decoded(row: Row | None, *json_columns: str) -> Row | None:
    if row is None:
        return None
    out = dict(row)
    for column in json_columns:
        if out.get(column) is not None:
            out[column] = orjson.loads(out[column])
    return out


def _channels(tx: Tx, table: str, condition: str) -> list[str]:
    """The channels with a row of `table` that meets `condition` (a process resumes their
    deadlines on start)."""
    return [row["channel_id"] for row in tx.execute(f"SELECT DISTINCT channel_id FROM {table} WHERE {condition}")]


def insert_poll(
    tx: Tx, *, poll_id: str, channel_id: str, title: str, options: list[dict[str, str]], started_at: int, ends_at: int
) -> None:
    tx.execute(
        "INSERT INTO polls (id, channel_id, title, options, status, started_at, ends_at) VALUES (?, ?, ?, ?, 'open', ?, ?)",
        (poll_id, channel_id, title, orjson.dumps(options).decode(), started_at, ends_at),
    )


def open_poll(tx: Tx, channel_id: str) -> Row | None:
    return _decoded(tx.one(f"{_POLL} WHERE channel_id = ? AND status = 'open'", (channel_id,)), "options")


def get_poll(tx: Tx, channel_id: str, poll_id: str) -> Row | None:
    return _decoded(tx.one(f"{_POLL} WHERE channel_id = ? AND id = ?", (channel_id, poll_id)), "options")


def latest_poll(tx: Tx, channel_id: str) -> Row | None:
    sql = f"{_POLL} WHERE channel_id = ? ORDER BY started_at DESC, id DESC LIMIT 1"
    return _decoded(tx.one(sql, (channel_id,)), "options")


def poll_tally(tx: Tx, poll_id: str) -> dict[str, int]:
    rows = tx.execute(
        "SELECT option_id, COUNT(*) AS votes FROM poll_votes WHERE poll_id = ? GROUP BY option_id", (poll_id,)
    )
    return {row["option_id"]: int(row["votes"]) for row in rows}


def has_voted(tx: Tx, poll_id: str, user_id: str) -> bool:
    return tx.one("SELECT 1 AS x FROM poll_votes WHERE poll_id = ? AND user_id = ?", (poll_id, user_id)) is not None


def insert_vote(tx: Tx, poll_id: str, user_id: str, option_id: str, now_ms: int) -> None:
    tx.execute(
        "INSERT INTO poll_votes (poll_id, user_id, option_id, voted_at) VALUES (?, ?, ?, ?)",
        (poll_id, user_id, option_id, now_ms),
    )


def end_poll(tx: Tx, poll_id: str, now_ms: int) -> bool:
    rows = tx.execute(
        "UPDATE polls SET status = 'ended', ended_at = ? WHERE id = ? AND status = 'open' RETURNING id",
        (now_ms, poll_id),
    )
    return bool(rows)


def channels_with_open_polls(tx: Tx) -> list[str]:
    return _channels(tx, "polls", "status = 'open'")


# --- predictions -----------------------------------------------------------------------------

_PREDICTION = (
    "SELECT id, channel_id, title, outcomes, status, started_at, locks_at, locked_at, ended_at,"
    " winning_outcome_id FROM predictions"
)


def insert_prediction(
    tx: Tx,
    *,
    prediction_id: str,
    channel_id: str,
    title: str,
    outcomes: list[dict[str, str]],
    started_at: int,
    locks_at: int,
) -> None:
    tx.execute(
        "INSERT INTO predictions (id, channel_id, title, outcomes, status, started_at, locks_at)"
        " VALUES (?, ?, ?, ?, 'open', ?, ?)",
        (prediction_id, channel_id, title, orjson.dumps(outcomes).decode(), started_at, locks_at),
    )


def active_prediction(tx: Tx, channel_id: str) -> Row | None:
    sql = f"{_PREDICTION} WHERE channel_id = ? AND status IN ('open', 'locked') ORDER BY started_at DESC LIMIT 1"
    return _decoded(tx.one(sql, (channel_id,)), "outcomes")


def get_prediction(tx: Tx, channel_id: str, prediction_id: str) -> Row | None:
    return _decoded(tx.one(f"{_PREDICTION} WHERE channel_id = ? AND id = ?", (channel_id, prediction_id)), "outcomes")


def bets(tx: Tx, prediction_id: str) -> list[Row]:
    return tx.execute(
        "SELECT user_id, outcome_id, points, placed_at FROM prediction_bets WHERE prediction_id = ?"
        " ORDER BY placed_at, user_id",
        (prediction_id,),
    )


def get_bet(tx: Tx, prediction_id: str, user_id: str) -> Row | None:
    return tx.one(
        "SELECT user_id, outcome_id, points, placed_at FROM prediction_bets WHERE prediction_id = ? AND user_id = ?",
        (prediction_id, user_id),
    )


def put_bet(tx: Tx, prediction_id: str, user_id: str, outcome_id: str, points: int, placed_at: int) -> None:
    tx.execute(
        "INSERT INTO prediction_bets (prediction_id, user_id, outcome_id, points, placed_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (prediction_id, user_id) DO UPDATE SET points = excluded.points",
        (prediction_id, user_id, outcome_id, points, placed_at),
    )


def record_payout(tx: Tx, prediction_id: str, user_id: str, amount: int) -> None:
    tx.execute(
        "UPDATE prediction_bets SET payout = ? WHERE prediction_id = ? AND user_id = ?",
        (amount, prediction_id, user_id),
    )


def lock_prediction(tx: Tx, prediction_id: str, now_ms: int) -> bool:
    rows = tx.execute(
        "UPDATE predictions SET status = 'locked', locked_at = ? WHERE id = ? AND status = 'open' RETURNING id",
        (now_ms, prediction_id),
    )
    return bool(rows)


def finish_prediction(tx: Tx, prediction_id: str, status: str, winning: str | None, now_ms: int) -> bool:
    allowed = "('open', 'locked')" if status == "cancelled" else "('locked')"
    rows = tx.execute(
        f"UPDATE predictions SET status = ?, winning_outcome_id = ?, ended_at = ? WHERE id = ? AND status IN {allowed}"
        " RETURNING id",
        (status, winning, now_ms, prediction_id),
    )
    return bool(rows)


def channels_with_open_predictions(tx: Tx) -> list[str]:
    return _channels(tx, "predictions", "status = 'open'")


# --- giveaways -------------------------------------------------------------------------------

_GIVEAWAY = "SELECT id, channel_id, title, subscribers_only, status, started_at, ends_at, ended_at FROM giveaways"


def insert_giveaway(
    tx: Tx,
    *,
    giveaway_id: str,
    channel_id: str,
    title: str,
    subscribers_only: bool,
    started_at: int,
    ends_at: int | None,
) -> None:
    tx.execute(
        "INSERT INTO giveaways (id, channel_id, title, subscribers_only, status, started_at, ends_at)"
        " VALUES (?, ?, ?, ?, 'open', ?, ?)",
        (giveaway_id, channel_id, title, subscribers_only, started_at, ends_at),
    )


def open_giveaway(tx: Tx, channel_id: str) -> Row | None:
    return tx.one(f"{_GIVEAWAY} WHERE channel_id = ? AND status = 'open'", (channel_id,))


def get_giveaway(tx: Tx, channel_id: str, giveaway_id: str) -> Row | None:
    return tx.one(f"{_GIVEAWAY} WHERE channel_id = ? AND id = ?", (channel_id, giveaway_id))


def latest_giveaway(tx: Tx, channel_id: str) -> Row | None:
    return tx.one(f"{_GIVEAWAY} WHERE channel_id = ? ORDER BY started_at DESC, id DESC LIMIT 1", (channel_id,))


def entry_count(tx: Tx, giveaway_id: str) -> int:
    return int(tx.scalar("SELECT COUNT(*) FROM giveaway_entries WHERE giveaway_id = ?", (giveaway_id,)) or 0)


def winners(tx: Tx, giveaway_id: str) -> list[Row]:
    return tx.execute(
        "SELECT u.id AS user_id, u.username, u.display_name FROM giveaway_entries e JOIN users u ON u.id = e.user_id"
        " WHERE e.giveaway_id = ? AND e.won_at IS NOT NULL ORDER BY e.won_at, u.id",
        (giveaway_id,),
    )


def eligible_entrants(tx: Tx, giveaway_id: str) -> list[Row]:
    return tx.execute(
        "SELECT u.id AS user_id, u.username, u.display_name FROM giveaway_entries e JOIN users u ON u.id = e.user_id"
        " WHERE e.giveaway_id = ? AND e.won_at IS NULL ORDER BY u.id",
        (giveaway_id,),
    )


def has_entered(tx: Tx, giveaway_id: str, user_id: str) -> bool:
    sql = "SELECT 1 AS x FROM giveaway_entries WHERE giveaway_id = ? AND user_id = ?"
    return tx.one(sql, (giveaway_id, user_id)) is not None


def insert_entry(tx: Tx, giveaway_id: str, user_id: str, now_ms: int) -> None:
    tx.execute(
        "INSERT INTO giveaway_entries (giveaway_id, user_id, entered_at) VALUES (?, ?, ?)",
        (giveaway_id, user_id, now_ms),
    )


def mark_winners(tx: Tx, giveaway_id: str, user_ids: list[str], now_ms: int) -> None:
    tx.execute_many(
        "UPDATE giveaway_entries SET won_at = ? WHERE giveaway_id = ? AND user_id = ? AND won_at IS NULL",
        [(now_ms, giveaway_id, user_id) for user_id in user_ids],
    )


def close_giveaway(tx: Tx, giveaway_id: str, now_ms: int) -> bool:
    rows = tx.execute(
        "UPDATE giveaways SET status = 'closed', ended_at = ? WHERE id = ? AND status = 'open' RETURNING id",
        (now_ms, giveaway_id),
    )
    return bool(rows)


def channels_with_timed_giveaways(tx: Tx) -> list[str]:
    return _channels(tx, "giveaways", "status = 'open' AND ends_at IS NOT NULL")


# --- goals -----------------------------------------------------------------------------------

_GOAL = "SELECT id, type, title, current, target, period, period_start, completed_period FROM goals"


def goals(tx: Tx, channel_id: str) -> list[Row]:
    return tx.execute(f"{_GOAL} WHERE channel_id = ? ORDER BY created_at, id", (channel_id,))


def save_goal(tx: Tx, channel_id: str, goal: Row, now_ms: int, *, created: bool) -> None:
    if created:
        tx.execute(
            "INSERT INTO goals (id, channel_id, type, title, current, target, period, period_start, completed_period,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                goal["id"],
                channel_id,
                goal["type"],
                goal["title"],
                goal["current"],
                goal["target"],
                goal["period"],
                goal["period_start"],
                goal["completed_period"],
                now_ms,
            ),
        )
        return
    tx.execute(
        "UPDATE goals SET current = ?, target = ?, period_start = ?, completed_period = ? WHERE id = ? AND channel_id = ?",
        (goal["current"], goal["target"], goal["period_start"], goal["completed_period"], goal["id"], channel_id),
    )


def roll_over_goal(tx: Tx, goal_id: str, old_start: int, new_start: int) -> bool:
    rows = tx.execute(
        "UPDATE goals SET current = 0, completed_period = NULL, period_start = ? WHERE id = ? AND period_start = ?"
        " RETURNING id",
        (new_start, goal_id, old_start),
    )
    return bool(rows)


def channels_with_calendar_goals(tx: Tx) -> list[str]:
    return _channels(tx, "goals", "period IN ('day', 'week', 'month')")


def count_once(tx: Tx, channel_id: str, key: str, now_ms: int) -> bool:
    """Record that an event was counted; False when it had been."""
    rows = tx.execute(
        "INSERT INTO interactive_counted_events (event_id, channel_id, counted_at) VALUES (?, ?, ?)"
        " ON CONFLICT (event_id) DO NOTHING RETURNING event_id",
        (key, channel_id, now_ms),
    )
    return bool(rows)


# --- timers ----------------------------------------------------------------------------------

_TIMER = "SELECT id, title, status, duration_seconds, remaining_ms, ends_at, subathon FROM timers"


def live_timers(tx: Tx, channel_id: str) -> list[Row]:
    rows = tx.execute(
        f"{_TIMER} WHERE channel_id = ? AND status IN ('running', 'paused') ORDER BY created_at, id", (channel_id,)
    )
    return [_decoded(row, "subathon") or row for row in rows]


def all_timers(tx: Tx, channel_id: str, limit: int = 100) -> list[Row]:
    rows = tx.execute(f"{_TIMER} WHERE channel_id = ? ORDER BY created_at DESC, id LIMIT ?", (channel_id, limit))
    return [_decoded(row, "subathon") or row for row in rows]


def get_timer(tx: Tx, channel_id: str, timer_id: str) -> Row | None:
    return _decoded(tx.one(f"{_TIMER} WHERE channel_id = ? AND id = ?", (channel_id, timer_id)), "subathon")


def save_timer(tx: Tx, channel_id: str, timer: Row, now_ms: int, *, created: bool) -> None:
    subathon: Any = None if timer["subathon"] is None else orjson.dumps(timer["subathon"]).decode()
    if created:
        tx.execute(
            "INSERT INTO timers (id, channel_id, title, status, duration_seconds, remaining_ms, ends_at, subathon,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                timer["id"],
                channel_id,
                timer["title"],
                timer["status"],
                timer["duration_seconds"],
                timer["remaining_ms"],
                timer["ends_at"],
                subathon,
                now_ms,
                now_ms,
            ),
        )
        return
    tx.execute(
        "UPDATE timers SET status = ?, remaining_ms = ?, ends_at = ?, updated_at = ? WHERE id = ? AND channel_id = ?",
        (timer["status"], timer["remaining_ms"], timer["ends_at"], now_ms, timer["id"], channel_id),
    )


def expire_timer(tx: Tx, timer_id: str, ends_at: int, now_ms: int) -> bool:
    rows = tx.execute(
        "UPDATE timers SET status = 'ended', remaining_ms = 0, ends_at = NULL, updated_at = ?"
        " WHERE id = ? AND status = 'running' AND ends_at = ? RETURNING id",
        (now_ms, timer_id, ends_at),
    )
    return bool(rows)


def channels_with_running_timers(tx: Tx) -> list[str]:
    return _channels(tx, "timers", "status = 'running'")
