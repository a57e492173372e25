"""Badges and teams: public reads.

Badges are operator-managed (`volthub badges award|withdraw`); the catalogue ships with
the system badges chat messages carry (broadcaster, moderator, vip, subscriber, bot, ...).
Teams are operator-managed too (`volthub teams create|add-member|...`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_response

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.runtime import runtime
from volthub.http.schemas import Model, PageQuery, Query, example_of
from volthub.services.catalogue import Badge, BadgeCatalogue, Team, Teams

badges_blueprint = Blueprint("badges", __name__, url_prefix="/api/badges")
teams_blueprint = Blueprint("teams", __name__, url_prefix="/api/teams")


def badge_catalogue() -> BadgeCatalogue:
    return runtime().services.badges


def teams() -> Teams:
    return runtime().services.teams


class BadgeOut(Model):
    slug: str = Field(description="the slug chat messages carry in `badges`")
    category: str
    title: str
    description: str


def badge_out(badge: Badge) -> BadgeOut:
    return BadgeOut.from_record(badge)


class CatalogQuery(Query):
    category: Literal["event", "achievement", "system"] | None = None


class CatalogOut(Model):
    example = {
        "badges": [
            {
                "slug": "speedrun-club",
                "category": "Just Chatting",
                "title": "Friday night speedrun",
                "description": "Speedruns and chill every Friday.",
            }
        ]
    }

    badges: list[BadgeOut]


class ChannelRef(Model):
    id: str
    username: str


class SubscriptionBadgeOut(Model):
    slug: str
    tier: str
    months: int = Field(description="tenure from which this badge is shown")
    title: str


class RoleBadgeOut(Model):
    slug: str = Field(description="broadcaster, moderator or vip")
    title: str
    holders: int = Field(description="members holding the role in this channel now")


class ChannelBadgesOut(Model):
    example = {
        "channel": {"id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000", "username": "ada_streams"},
        "badges": [{"slug": "speedrun-club", "tier": "tier1", "months": 1, "title": "Friday night speedrun"}],
        "roles": [{"slug": "speedrun-club", "title": "Friday night speedrun", "holders": 1}],
    }

    channel: ChannelRef
    badges: list[SubscriptionBadgeOut] = Field(
        description="the subscriber badge at each tenure milestone the channel's subscribers reached, per tier"
    )
    roles: list[RoleBadgeOut] = Field(description="the role badges someone holds in this channel")


class UserBadgeOut(BadgeOut):
    channelId: str | None = Field(description="the channel it belongs to; null for a global badge")
    source: str = Field(description="awarded (stored) or chat (the user's standing in the channel)")
    awardedAt: str | None


class UserBadgesQuery(Query):
    channel: str | None = Field(None, min_length=1, max_length=25, description="a channel username")


class UserBadgesOut(Model):
    example = {
        "user": {"id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000", "username": "ada_streams"},
        "channel": {"id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000", "username": "ada_streams"},
        "badges": [
            {
                "slug": "speedrun-club",
                "category": "Just Chatting",
                "title": "Friday night speedrun",
                "description": "Speedruns and chill every Friday.",
                "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
                "source": "awarded",
                "awardedAt": "2026-03-14T18:30:00Z",
            }
        ],
    }

    user: ChannelRef
    channel: ChannelRef | None
    badges: list[UserBadgeOut]


@badges_blueprint.get("/catalog")
@access.public
@tag(["Badges"])
@validate_querystring(CatalogQuery)
@validate_response(CatalogOut)
async def catalog(query_args: CatalogQuery) -> CatalogOut:
    """The badge catalogue, optionally one category (event, achievement, system)."""
    return CatalogOut(badges=[badge_out(b) for b in await badge_catalogue().catalogue(query_args.category)])


@badges_blueprint.get("/channel/<username>")
@access.public
@tag(["Badges"])
@error_responses(404)
@validate_response(ChannelBadgesOut)
async def channel_badges(username: str) -> ChannelBadgesOut:
    """A channel's badges, from its own data: the `subscriber` badge at each tenure
    milestone its subscribers have reached, per tier (none before anyone subscribed), and
    the role badges held there (`broadcaster`, and `moderator`/`vip` when someone holds them)."""
    channel, found, roles = await badge_catalogue().of_channel(username)
    return ChannelBadgesOut(
        channel=ChannelRef(id=channel.id, username=channel.username),
        badges=[SubscriptionBadgeOut(slug=b.slug, tier=b.tier, months=b.months, title=b.title) for b in found],
        roles=[RoleBadgeOut(slug=r.slug, title=r.title, holders=r.holders) for r in roles],
    )


@badges_blueprint.get("/user/<username>")
@access.public
@tag(["Badges"])
@error_responses(404)
@validate_querystring(UserBadgesQuery)
@validate_response(UserBadgesOut)
async def user_badges(username: str, query_args: UserBadgesQuery) -> UserBadgesOut:
    """A user's badges: global awards, and with `?channel=` also that channel's awards and
    the badges chat shows for them there (same slugs as chat messages). Usernames any case."""
    found = await badge_catalogue().of_user(username, query_args.channel)
    return UserBadgesOut(
        user=ChannelRef(id=found.user.id, username=found.user.username),
        channel=ChannelRef(id=found.channel.id, username=found.channel.username) if found.channel else None,
        badges=[UserBadgeOut.from_record(b, **badge_out(b.badge).model_dump()) for b in found.badges],
    )


class TeamOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "slug": "speedrun-club",
        "name": "Speedrun Club",
        "description": "Speedruns and chill every Friday.",
        "memberCount": 3,
        "createdAt": "2026-03-14T18:30:00Z",
    }

    id: str
    slug: str
    name: str
    description: str
    memberCount: int
    createdAt: str


def team_out(team: Team) -> TeamOut:
    return TeamOut.from_record(team)


class TeamList(Model):
    example = {"items": [example_of(TeamOut)], "nextCursor": None}

    items: list[TeamOut]
    nextCursor: str | None


class MemberOut(Model):
    userId: str
    username: str
    displayName: str
    avatarUrl: str | None
    role: str = Field(description="owner | member")
    joinedAt: str


class MemberList(Model):
    example = {
        "team": example_of(TeamOut),
        "items": [
            {
                "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
                "username": "ada_streams",
                "displayName": "Ada Streams",
                "avatarUrl": "https://volthub.example/avatarUrl",
                "role": "member",
                "joinedAt": "2026-03-14T18:30:00Z",
            }
        ],
        "nextCursor": None,
    }

    team: TeamOut
    items: list[MemberOut]
    nextCursor: str | None


@teams_blueprint.get("")
@access.public
@tag(["Teams"])
@validate_querystring(PageQuery)
@validate_response(TeamList)
async def list_teams(query_args: PageQuery) -> TeamList:
    """Teams by slug; cursor list."""
    found, next_cursor = await teams().page(query_args.limit, query_args.cursor)
    return TeamList(items=[team_out(t) for t in found], nextCursor=next_cursor)


@teams_blueprint.get("/<slug>")
@access.public
@tag(["Teams"])
@error_responses(404)
@validate_response(TeamOut)
async def get_team(slug: str) -> TeamOut:
    """One team by its slug: its name, description and how many members it has."""
    return team_out(await teams().get(slug))


@teams_blueprint.get("/<slug>/members")
@access.public
@tag(["Teams"])
@error_responses(404)
@validate_querystring(PageQuery)
@validate_response(MemberList)
async def team_members(slug: str, query_args: PageQuery) -> MemberList:
    """Owners first, then by join time; cursor list."""
    team, people, next_cursor = await teams().members(slug, query_args.limit, query_args.cursor)
    return MemberList(
        team=team_out(team),
        items=[MemberOut.from_record(member) for member in people],
        nextCursor=next_cursor,
    )
