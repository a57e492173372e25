"""Badges and teams.

Badges: the catalogue by category (event, achievement, system), a channel's subscription
badges (the `subscriber` badge at each tier and tenure milestone), and a user's badges:
those awarded to them (globally or in one channel, `volthub badges award`) and, when a
channel is named, the badges chat gives them there (`broadcaster`, `moderator`, `vip`,
`subscriber`) from the same function chat messages use, so both show the same slugs.

Teams: groups of channels, created and filled by the operator (`volthub teams`).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from volthub.hub.clock import Clock, to_ms
from volthub.hub.components import chat_rules
from volthub.persistence import Database, Tx
from volthub.persistence import catalogue as repo
from volthub.persistence import chat as chat_repo
from volthub.persistence.catalogue import Badge, Team, TeamExists, TeamMember
from volthub.services.channels import ChannelNotFound, User, channel_by_username

__all__ = [
    "Badge",
    "BadgeCatalogue",
    "CATEGORIES",
    "ChannelNotFound",
    "SUBSCRIBER_MILESTONES",
    "RoleBadge",
    "SubscriptionBadge",
    "Team",
    "TeamExists",
    "TeamMember",
    "TeamNotFound",
    "Teams",
    "UserBadges",
]

CATEGORIES = ("event", "achievement", "system")
TIERS = ("tier1", "tier2", "tier3")
# Months of tenure at which the subscriber badge changes (1 = new subscriber).
SUBSCRIBER_MILESTONES = (1, 3, 6, 12, 24, 36)
TEAM_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")


class TeamNotFound(LookupError):
    pass


@dataclass(frozen=True)
class SubscriptionBadge:
    slug: str
    tier: str
    months: int
    title: str


@dataclass(frozen=True)
class RoleBadge:
    slug: str
    title: str
    holders: int


@dataclass(frozen=True)
class AwardedBadge:
    badge: Badge
    channel_id: str | None
    source: str  # "awarded" (stored) | "chat" (the channel standing, as chat shows it)
    awarded_at: int | None


@dataclass(frozen=True)
class UserBadges:
    user: User
    channel: User | None
    badges: list[AwardedBadge]


class BadgeCatalogue:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    async def catalogue(self, category: str | None) -> list[Badge]:
        return await self._db.read(lambda tx: repo.badges(tx, category))

    async def of_channel(self, username: str) -> tuple[User, list[SubscriptionBadge], list[RoleBadge]]:
        """The channel's badges from its own data: the subscriber badge at each milestone
        its subscribers reached, per tier, and a role badge per role someone holds there
        (the broadcaster's always)."""
        now = to_ms(self._clock.now())

        def read(tx: Tx) -> tuple[User, dict[str, int], dict[str, int]]:
            channel = channel_by_username(tx, username)
            return channel, repo.subscriber_tenure_by_tier(tx, channel.id), repo.role_holders(tx, channel.id, now)

        channel, tenure, roles = await self._db.read(read)
        found = [
            SubscriptionBadge("subscriber", tier, months, f"{tier[-1]}-tier, {months} month{'s' if months > 1 else ''}")
            for tier in TIERS
            for months in SUBSCRIBER_MILESTONES
            if months <= tenure.get(tier, 0)
        ]
        held = [RoleBadge("broadcaster", "Broadcaster", 1)] + [
            RoleBadge(role, role.upper() if role == "vip" else role.capitalize(), roles[role])
            for role in ("moderator", "vip")
            if roles.get(role)
        ]
        return channel, found, held

    async def of_user(self, username: str, channel_username: str | None) -> UserBadges:
        now = to_ms(self._clock.now())

        def read(tx: Tx) -> UserBadges:
            user = channel_by_username(tx, username)
            channel = channel_by_username(tx, channel_username) if channel_username else None
            found = [
                AwardedBadge(b.badge, b.channel_id, "awarded", b.awarded_at)
                for b in repo.user_badges(tx, user.id, channel.id if channel else None)
            ]
            if channel is not None:
                row = chat_repo.standing(tx, channel.id, user.id, now)
                slugs = chat_rules.badges(chat_rules.Standing.from_row(row)) if row else []
                known = repo.badges_by_slug(tx, slugs)
                found = [AwardedBadge(known[s], channel.id, "chat", None) for s in slugs if s in known] + found
            return UserBadges(user, channel, found)

        return await self._db.read(read)

    async def award(self, username: str, slug: str, channel_username: str | None) -> bool:
        now = to_ms(self._clock.now())

        def change(tx: Tx) -> bool:
            user = channel_by_username(tx, username)
            channel = channel_by_username(tx, channel_username) if channel_username else None
            if not repo.badges_by_slug(tx, [slug]):
                raise LookupError(f"no badge {slug!r} in the catalogue")
            return repo.award(tx, user.id, slug, channel.id if channel else None, now)

        return await self._db.write(change)

    async def withdraw(self, username: str, slug: str, channel_username: str | None) -> bool:
        def change(tx: Tx) -> bool:
            user = channel_by_username(tx, username)
            channel = channel_by_username(tx, channel_username) if channel_username else None
            return repo.withdraw(tx, user.id, slug, channel.id if channel else None)

        return await self._db.write(change)


class Teams:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    async def page(self, limit: int, cursor: str | None) -> tuple[list[Team], str | None]:
        return await self._db.read(lambda tx: repo.teams(tx, limit, cursor))

    async def get(self, slug: str) -> Team:
        found = await self._db.read(lambda tx: repo.team(tx, slug.lower()))
        if found is None:
            raise TeamNotFound(slug)
        return found

    async def members(self, slug: str, limit: int, cursor: str | None) -> tuple[Team, list[TeamMember], str | None]:
        def read(tx: Tx) -> tuple[Team, list[TeamMember], str | None]:
            found = repo.team(tx, slug.lower())
            if found is None:
                raise TeamNotFound(slug)
            people, next_cursor = repo.members(tx, found.id, limit, cursor)
            return found, people, next_cursor

        return await self._db.read(read)

    # -- the operator's changes (`volthub teams`) --

    async def create(self, slug: str, name: str, description: str = "") -> Team:
        if not TEAM_SLUG.fullmatch(slug):
            raise ValueError("team slugs are 1–40 of a–z, 0–9 and inner hyphens")
        if not name.strip() or len(name) > 100:
            raise ValueError("team names are 1–100 characters")
        now = to_ms(self._clock.now())
        return await self._db.write(
            lambda tx: repo.create_team(tx, str(uuid.uuid4()), slug, name.strip(), description, now)
        )

    async def delete(self, slug: str) -> bool:
        return await self._db.write(lambda tx: repo.delete_team(tx, slug))

    async def add_member(self, slug: str, username: str, role: str = "member") -> bool:
        now = to_ms(self._clock.now())

        def change(tx: Tx) -> bool:
            found = repo.team(tx, slug)
            if found is None:
                raise TeamNotFound(slug)
            user = channel_by_username(tx, username)
            return repo.add_member(tx, found.id, user.id, role, now)

        return await self._db.write(change)

    async def remove_member(self, slug: str, username: str) -> bool:
        def change(tx: Tx) -> bool:
            found = repo.team(tx, slug)
            if found is None:
                raise TeamNotFound(slug)
            user = channel_by_username(tx, username)
            return repo.remove_member(tx, found.id, user.id)

        return await self._db.write(change)
