"""Chat reads that are not a channel's live state: history, activity,
viewers, the chat settings as stored.

Changes to a channel's chat (messages, moderation, modes) go through its actor
(`volthub/hub/actor.py`); this service only reads, each answer in one read transaction.
"""

from __future__ import annotations

import heapq
import inspect
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from volthub.hub.clock import Clock, to_ms
from volthub.hub.components.chat_rules import ChatSettings, Standing
from volthub.persistence import Database, Tx
from volthub.persistence import chat as repo
from volthub.services.channels import ChannelNotFound, User, channel_by_id, channel_by_username

__all__ = [
    "ChannelNotFound",
    "ChatActivity",
    "ChatReads",
    "ChatSettings",
    "Member",
    "Presence",
    "STANDINGS_BATCH",
    "Standing",
    "VIEWER_LIST_MAX",
    "ViewerList",
]

# The viewer list shows this many signed-in viewers; the counts cover everyone.
VIEWER_LIST_MAX = 1000
# Users looked up per standings query. A channel can have any number of viewers, and one
# `IN (...)` with all of them overflows PostgreSQL's 65535 bind parameters (and old
# SQLite builds' 999): batches keep every statement small whatever the audience.
STANDINGS_BATCH = 900

PresenceSnapshot = tuple[Iterable[str], int]


class Presence(Protocol):
    """Who is connected to a channel (the Events API fan-out provides it)."""

    def snapshot(self, channel_id: str) -> PresenceSnapshot | Awaitable[PresenceSnapshot]: ...


async def presence_snapshot(presence: Presence | None, channel_id: str) -> tuple[list[str], int]:
    """(signed-in viewer ids, anonymous count) of a channel; nobody when no presence source
    runs. Per process it is a plain call; across processes (PostgreSQL) a database read."""
    if presence is None:
        return [], 0
    snapshot = presence.snapshot(channel_id)
    if inspect.isawaitable(snapshot):
        snapshot = await snapshot
    user_ids, anonymous = snapshot
    return list(user_ids), int(anonymous)


@dataclass(frozen=True)
class Member:
    """A signed-in viewer: who they are in the channel, and their avatar."""

    standing: Standing
    avatar_url: str | None


@dataclass(frozen=True)
class ViewerList:
    channel: User
    listed: list[Member]  # ranked: broadcaster, moderators, VIPs, subscribers, others; capped
    authenticated: int  # signed-in viewers whose account exists
    anonymous: int


@dataclass(frozen=True)
class ChatActivity:
    channel_id: str
    window_seconds: int
    messages: int  # sent in the window; card and system messages excluded
    chatters: int  # distinct senders in the window
    signed_in: int  # distinct signed-in viewers now
    anonymous: int


class ChatReads:
    def __init__(self, database: Database, clock: Clock, presence: Presence | None = None) -> None:
        self._db = database
        self._clock = clock
        self._presence = presence

    async def settings(self, channel_id: str) -> ChatSettings:
        """The stored chat modes; a channel that never chatted has the defaults."""
        return ChatSettings.from_row(await self._db.read(lambda tx: repo.get_settings(tx, channel_id)))

    async def channel_settings(self, channel_id: str) -> tuple[User, ChatSettings]:
        """The channel (ChannelNotFound when unknown) and its chat modes."""

        def read(tx: Tx) -> tuple[User, ChatSettings]:
            channel = channel_by_id(tx, channel_id)
            return channel, ChatSettings.from_row(repo.get_settings(tx, channel.id))

        return await self._db.read(read)

    async def history(self, channel_id: str, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` messages not deleted, oldest first, as their chat.message payloads."""

        def read(tx: Tx) -> list[dict[str, Any]]:
            channel = channel_by_id(tx, channel_id)
            return repo.history(tx, channel.id, limit)

        return await self._db.read(read)

    async def activity(self, channel_id: str, window_seconds: int) -> ChatActivity:
        since = self._now_ms() - window_seconds * 1000

        def read(tx: Tx) -> tuple[User, tuple[int, int]]:
            channel = channel_by_id(tx, channel_id)
            return channel, repo.activity(tx, channel.id, since)

        channel, (messages, chatters) = await self._db.read(read)
        user_ids, anonymous = await self._snapshot(channel.id)
        return ChatActivity(channel.id, window_seconds, messages, chatters, len(set(user_ids)), anonymous)

    async def viewers(self, channel: str, *, by_username: bool = False) -> ViewerList:
        """Signed-in viewers with their standing (ranked, at most VIEWER_LIST_MAX), and counts.

        `channel` is the channel's id, or with `by_username` its username (any case).
        """
        find = channel_by_username if by_username else channel_by_id
        found = await self._db.read(lambda tx: find(tx, channel))
        user_ids, anonymous = await self._snapshot(found.id)
        now_ms = self._now_ms()
        members = await self._db.read(lambda tx: list(_standings_in_batches(tx, found.id, user_ids, now_ms)))
        listed = heapq.nsmallest(VIEWER_LIST_MAX, members, key=_rank)
        return ViewerList(found, listed, authenticated=len(members), anonymous=anonymous)

    async def _snapshot(self, channel_id: str) -> tuple[list[str], int]:
        return await presence_snapshot(self._presence, channel_id)

    def _now_ms(self) -> int:
        return to_ms(self._clock.now())


def _standings_in_batches(tx: Tx, channel_id: str, user_ids: Iterable[str], now_ms: int) -> Iterator[Member]:
    """Each known user's standing, STANDINGS_BATCH ids per query; unknown ids are skipped."""
    ids = sorted(set(user_ids))
    for batch in _batches(ids, STANDINGS_BATCH):
        for row in repo.standings(tx, channel_id, batch, now_ms).values():
            yield Member(Standing.from_row(row), row["avatar_url"])


def _batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _rank(member: Member) -> tuple[int, str]:
    """Broadcaster, moderators, VIPs, subscribers, everyone else; then by name."""
    who = member.standing
    flags = (who.is_broadcaster, who.is_moderator, who.is_vip, who.is_subscriber, True)
    return flags.index(True), who.username.lower()
