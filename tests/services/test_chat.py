"""services/chat.py on SQLite and PostgreSQL: the chat reads behind the public chat routes."""

from __future__ import annotations

import uuid

import pytest
import trio

from tests.conftest import insert_chat_message
from volthub.hub.clock import TrioClock, to_ms
from volthub.persistence import Database, Tx
from volthub.persistence import chat as chat_repo
from volthub.services.chat import STANDINGS_BATCH, VIEWER_LIST_MAX, ChannelNotFound, ChatReads

START = 1_800_000_000.0
# PostgreSQL refuses a statement with more bind parameters than this.
POSTGRES_PARAMETER_CAP = 65_535


class FakePresence:
    """The presence source fed by hand: (signed-in ids, anonymous count) per channel."""

    def __init__(self) -> None:
        self.viewers: dict[str, tuple[list[str], int]] = {}

    def snapshot(self, channel_id: str) -> tuple[list[str], int]:
        return self.viewers.get(channel_id, ([], 0))


async def make_users(db: Database, names: list[str]) -> list[str]:
    ids = [str(uuid.uuid4()) for _ in names]
    rows = [(user_id, name, name.lower(), name, "h", 1, 1) for user_id, name in zip(ids, names, strict=True)]

    def insert(tx: Tx) -> None:
        tx.execute_many(
            "INSERT INTO users (id, username, username_lower, display_name, password_hash, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    await db.write(insert)
    return ids


# Many users in one statement (executemany of 70,000 rows takes seconds): ids and names
# are numbered in SQL. `?` is the count.
_MANY_USERS = {
    "postgresql": "INSERT INTO users (id, username, username_lower, display_name, password_hash, created_at,"
    " updated_at) SELECT '00000000-0000-4000-8000-' || lpad(n::text, 12, '0'), 'viewer' || lpad(n::text, 6, '0'),"
    " 'viewer' || lpad(n::text, 6, '0'), 'Viewer', 'h', 1, 1 FROM generate_series(0, ? - 1) AS n",
    "sqlite": "WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n + 1 < ?)"
    " INSERT INTO users (id, username, username_lower, display_name, password_hash, created_at, updated_at)"
    " SELECT printf('00000000-0000-4000-8000-%012d', n), printf('viewer%06d', n), printf('viewer%06d', n),"
    " 'Viewer', 'h', 1, 1 FROM seq",
}


async def make_many_viewers(db: Database, count: int) -> list[str]:
    """`viewer000000`, ... in name order; their ids in the same order."""
    await db.write(lambda tx: tx.execute(_MANY_USERS[tx.dialect], (count,)))
    return [f"00000000-0000-4000-8000-{n:012d}" for n in range(count)]


async def test_viewers_of_a_channel_bigger_than_the_parameter_cap(db: Database, mock_clock: trio.testing.MockClock):
    """More signed-in viewers than PostgreSQL takes parameters in one statement: no error,
    every known viewer counted, the list capped and ranked (broadcaster and staff first)."""
    audience = POSTGRES_PARAMETER_CAP + 5_000
    [channel] = await make_users(db, ["Streamer"])
    viewers = await make_many_viewers(db, audience)
    mod = viewers[-1]  # sorts last by name; its role must lift it into the list
    await db.write(lambda tx: chat_repo.grant_role(tx, channel, mod, "moderator", to_ms(START)))
    unknown = [str(uuid.uuid4()) for _ in range(10)]  # connected ids with no account: skipped
    presence = FakePresence()
    presence.viewers[channel] = ([channel, *viewers, *unknown], 7)

    found = await ChatReads(db, TrioClock(START), presence).viewers(channel)

    assert (found.authenticated, found.anonymous) == (audience + 1, 7)
    assert len(found.listed) == VIEWER_LIST_MAX
    assert [m.standing.user_id for m in found.listed[:3]] == [channel, mod, viewers[0]]
    assert found.listed[-1].standing.username == f"viewer{VIEWER_LIST_MAX - 3:06d}"


async def test_viewers_by_username_any_case_and_batches_are_small(db: Database, mock_clock: trio.testing.MockClock):
    [channel, *fans] = await make_users(db, ["CaseChannel", *(f"fan{n}" for n in range(STANDINGS_BATCH + 1))])
    presence = FakePresence()
    presence.viewers[channel] = (fans + fans[:5], 0)  # a viewer on two tabs counts once
    found = await ChatReads(db, TrioClock(START), presence).viewers("casechannel", by_username=True)
    assert found.channel.id == channel
    assert found.authenticated == STANDINGS_BATCH + 1
    assert STANDINGS_BATCH + 10 < 999  # under the smallest bind-parameter limit we run on


async def test_without_presence_nobody_is_watching(db: Database, mock_clock: trio.testing.MockClock):
    [channel] = await make_users(db, ["Quiet"])
    reads = ChatReads(db, TrioClock(START))
    found = await reads.viewers(channel)
    assert (found.listed, found.authenticated, found.anonymous) == ([], 0, 0)
    activity = await reads.activity(channel, 300)
    assert (activity.messages, activity.chatters, activity.signed_in, activity.anonymous) == (0, 0, 0, 0)


async def add_message(db: Database, channel: str, label: int, user_id: str, at_ms: int, system: bool = False) -> None:
    """A message whose text is `m{label}` (the store gives it the channel's next number)."""
    await db.write(lambda tx: insert_chat_message(tx, channel, user_id, f"m{label}", at_ms, is_system=system))


async def test_activity_counts_the_window_and_history_is_oldest_first(db: Database, mock_clock: trio.testing.MockClock):
    channel, fan = await make_users(db, ["Active", "Chatty"])
    reads = ChatReads(db, TrioClock(START), FakePresence())
    now_ms = to_ms(START)
    await add_message(db, channel, 1, fan, now_ms - 301_000)  # before the window
    await add_message(db, channel, 2, fan, now_ms - 1_000)
    await add_message(db, channel, 3, channel, now_ms - 500)
    await add_message(db, channel, 4, channel, now_ms - 100, system=True)  # cards do not count
    activity = await reads.activity(channel, 300)
    assert (activity.channel_id, activity.messages, activity.chatters) == (channel, 2, 2)
    mock_clock.jump(300)
    assert (await reads.activity(channel, 300)).messages == 0
    assert [m["message"] for m in await reads.history(channel, 3)] == ["m2", "m3", "m4"]


async def test_settings_reads(db: Database, mock_clock: trio.testing.MockClock):
    [channel] = await make_users(db, ["Modes"])
    reads = ChatReads(db, TrioClock(START))
    assert (await reads.settings(channel)).slow_mode_seconds == 0
    user, settings = await reads.channel_settings(channel)
    assert (user.id, settings.emote_only) == (channel, False)


@pytest.mark.parametrize("read", ["history", "activity", "channel_settings", "viewers", "viewers_by_name"])
async def test_unknown_channels(db: Database, mock_clock: trio.testing.MockClock, read: str):
    reads = ChatReads(db, TrioClock(START), FakePresence())
    missing = str(uuid.uuid4())
    calls = {
        "history": lambda: reads.history(missing, 10),
        "activity": lambda: reads.activity(missing, 300),
        "channel_settings": lambda: reads.channel_settings(missing),
        "viewers": lambda: reads.viewers(missing),
        "viewers_by_name": lambda: reads.viewers("nobody-here", by_username=True),
    }
    with pytest.raises(ChannelNotFound):
        await calls[read]()
