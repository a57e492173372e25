"""The one event catalogue: every platform event name, who receives it and what it carries.

Both delivery channels read it: the Events API (Socket.IO and SSE) and webhooks.
Each entry says

- its group, as the spec's tables group it;
- its transports: ``events_api`` and/or ``webhooks`` (the two tables differ: e.g.
  ``channel.subscription.end`` and ``user.*`` are webhook-only);
- whether anything on the platform emits it: ``PRODUCERS`` names the module that really
  does (a test parses it to check), so ``emitted`` cannot claim more than the code does; the
  hype-train events are listed by the spec and never fire; ``channel.cheer`` is only
  a legacy webhook name of ``channel.volts`` and fires when it does;
- whether the sandbox can send it as a test event (``SANDBOX_EVENTS``);
- whether it is *public*: delivered to any Events API connection subscribed to the channel,
  anonymous ones included (stream, chat and interaction lifecycle). Every other
  event reaches only the channel owner's authenticated connections;
- its payload fields (the ``data`` of the envelope), and a *builder*: a function named
  after the event (``channel.follow`` -> ``channel_follow``) that every producer and the
  sandbox call to build that ``data``, so each payload shape is written once, next to the
  fields it documents (a test holds each builder to its entry's fields).

Pure data and functions (sans-IO), importable from anywhere. Longer than ~500 lines on
purpose: the catalogue, its builders and the producer table belong together, so that a
change of a payload shape and of its documentation is one change in one file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

EVENTS_API: Final = "events_api"
WEBHOOKS: Final = "webhooks"
_BOTH: Final = frozenset({EVENTS_API, WEBHOOKS})
_WEBHOOKS_ONLY: Final = frozenset({WEBHOOKS})


@dataclass(frozen=True, slots=True)
class PayloadField:
    name: str
    type: str
    description: str
    optional: bool = False

    def document(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "description": self.description, "optional": self.optional}


@dataclass(frozen=True, slots=True)
class EventType:
    name: str
    group: str
    description: str
    fields: tuple[PayloadField, ...]
    transports: frozenset[str] = _BOTH
    never_fires: bool = False  # listed by the spec, never sent (hype train)
    public: bool = False
    alias_of: str | None = None  # a legacy name that receives another event
    webhook_scope: str | None = None  # webhooks get it only while the app holds this scope

    def document(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "description": self.description,
            "transports": {"eventsApi": EVENTS_API in self.transports, "webhooks": WEBHOOKS in self.transports},
            "emitted": is_emitted(self.name),
            "sandbox": self.name in SANDBOX_NAMES,
            "public": self.public,
            "aliasOf": self.alias_of,
            "webhookScope": self.webhook_scope,
            "fields": [field.document() for field in self.fields],
        }


def _f(name: str, type_: str, description: str, optional: bool = False) -> PayloadField:
    return PayloadField(name, type_, description, optional)


# Field sets shared by several events.
_WHO = (
    _f("userId", "string", "the user's id (immutable)"),
    _f("username", "string", "the user's username"),
    _f("displayName", "string", "the user's display name"),
)
_TEST = _f("isTest", "boolean", "true on sandbox test events", optional=True)
_MODERATOR = _f("moderator", "object", "{userId, username, displayName} of who acted")
_STREAM = (
    _f("streamId", "string", "id of the stream"),
    _f("userId", "string", "the broadcaster's id (the channel id)"),
    _f("username", "string", "the broadcaster's username"),
)
_POLL = (
    _f("pollId", "string", "id of the poll"),
    _f("title", "string", "the question"),
    _f("choices", "array", "[{id, title, votes}]"),
)
_GIVEAWAY = (
    _f("giveawayId", "string", "id of the giveaway"),
    _f("title", "string", "what is given away"),
)
_PREDICTION = (
    _f("predictionId", "string", "id of the prediction"),
    _f("title", "string", "the question"),
    _f("outcomes", "array", "[{id, title, users, points}]"),
)
_GOAL = (
    _f("goalId", "string", "id of the goal"),
    _f("type", "string", "what is counted (followers, subscribers, volts, ...)"),
    _f("description", "string", "the goal's text"),
    _f("currentAmount", "number", "progress so far"),
    _f("targetAmount", "number", "the target"),
    _f("period", "string", "stream, day, week, month or none: when the amount starts over"),
)
_SUBSCRIPTION = (
    *_WHO,
    _f("tier", "string", "tier1, tier2 or tier3"),
)


def _event(name: str, group: str, description: str, *fields: PayloadField, **options: Any) -> EventType:
    return EventType(name, group, description, tuple(fields), **options)


# Order: the spec's tables. Within each group, webhook-transport events keep the order of
# the webhook table, so the webhook view below reproduces it exactly.
CATALOGUE: Final[tuple[EventType, ...]] = (
    # ---------------------------------------------------------------- Stream
    _event(
        "stream.online",
        "Stream",
        "The channel went live.",
        *_STREAM,
        _f("title", "string", "stream title"),
        _f("category", "string|null", "category slug"),
        _f("startedAt", "string", "ISO 8601"),
        public=True,
    ),
    _event(
        "stream.offline",
        "Stream",
        "The channel's stream ended.",
        *_STREAM,
        _f("endedAt", "string", "ISO 8601"),
        _f("vodId", "string", "the VOD record the stream left", optional=True),
        public=True,
    ),
    _event(
        "stream.update",
        "Stream",
        "Title, category or tags changed (also while live).",
        *_STREAM[1:],
        _f("title", "string", "stream title"),
        _f("category", "string|null", "category slug"),
        _f("tags", "string[]", "stream tags (slugs)"),
        _f("channelTags", "string[]", "the channel's identity tags (slugs)"),
        _f("contentWarnings", "string[]", "content-warning tags of both lists"),
        public=True,
    ),
    # ---------------------------------------------------------------- Channel
    _event(
        "channel.follow",
        "Channel",
        "Someone followed the channel.",
        *_WHO,
        _f("followedAt", "string", "ISO 8601"),
        _TEST,
    ),
    _event(
        "channel.subscribe",
        "Channel",
        "Someone subscribed (or resubscribed).",
        *_SUBSCRIPTION,
        _f("isGift", "boolean", "false: bought by the subscriber"),
        _f("months", "number", "cumulative months"),
        _f("message", "string|null", "resubscription message"),
        _f("subscribedAt", "string", "ISO 8601"),
        _TEST,
    ),
    _event(
        "channel.subscription.gift",
        "Channel",
        "Someone gifted subscriptions.",
        *_SUBSCRIPTION,
        _f("quantity", "number", "subscriptions gifted (1-100)"),
        _f("amount", "number", "Volts paid", optional=True),
        _f("isAnonymous", "boolean", "the gifter chose to stay anonymous"),
        _f("giftedAt", "string", "ISO 8601"),
        _f("recipients", "array", "[{userId, username, displayName}] who received them", optional=True),
        _TEST,
    ),
    _event(
        "channel.subscription.end",
        "Channel",
        "A subscription was canceled or expired.",
        *_SUBSCRIPTION,
        _f("isGift", "boolean", "it was a gift"),
        _f("gifter", "object|null", "{userId, username, displayName}"),
        _f("reason", "string", "canceled or expired"),
        _f("endedAt", "string", "ISO 8601"),
        _f("expiresAt", "string", "ISO 8601"),
        transports=_WEBHOOKS_ONLY,
    ),
    _event(
        "channel.volts",
        "Channel",
        "Someone sent Volts to the channel.",
        *_WHO,
        _f("amount", "number", "Volts sent"),
        _f("message", "string|null", "the sender's message"),
        _f("sentAt", "string", "ISO 8601"),
        _TEST,
    ),
    _event(
        "channel.cheer",
        "Channel",
        "Legacy webhook name of channel.volts (same payload).",
        *_WHO,
        _f("amount", "number", "Volts sent"),
        _f("message", "string|null", "the sender's message"),
        _f("sentAt", "string", "ISO 8601"),
        transports=_WEBHOOKS_ONLY,
        alias_of="channel.volts",
    ),
    _event(
        "channel.raid",
        "Channel",
        "A raid arrived at (or left) the channel.",
        _f("direction", "string", "incoming or outgoing"),
        _f("fromChannelId", "string", "the raiding channel"),
        _f("fromUsername", "string", ""),
        _f("fromDisplayName", "string", ""),
        _f("toChannelId", "string", "the raided channel"),
        _f("toUsername", "string", ""),
        _f("viewers", "number", "viewers brought along"),
        _f("raidedAt", "string", "ISO 8601"),
        _TEST,
    ),
    _event(
        "channel.ban",
        "Channel",
        "A user was banned or timed out in chat.",
        *_WHO,
        _MODERATOR,
        _f("reason", "string|null", "why"),
        _f("isPermanent", "boolean", "false for a timeout"),
        _f("bannedAt", "string", "ISO 8601"),
        _f("endsAt", "string|null", "end of a timeout"),
        _f("durationSeconds", "number", "length of a timeout", optional=True),
    ),
    _event(
        "channel.unban",
        "Channel",
        "A ban or timeout was lifted.",
        *_WHO,
        _MODERATOR,
        _f("wasPermanent", "boolean", "it was a ban, not a timeout"),
        _f("unbannedAt", "string", "ISO 8601"),
    ),
    _event(
        "channel.moderator.add",
        "Channel",
        "A user was made a moderator.",
        *_WHO,
        _MODERATOR,
        _f("addedAt", "string", "ISO 8601"),
    ),
    _event(
        "channel.moderator.remove",
        "Channel",
        "A moderator was removed.",
        *_WHO,
        _MODERATOR,
        _f("removedAt", "string", "ISO 8601"),
    ),
    _event(
        "channel.channel_points_redemption",
        "Channel",
        "A channel-points reward was redeemed.",
        _f("redemptionId", "string", ""),
        _f("rewardId", "string", "matches a reward item id"),
        _f("rewardTitle", "string", ""),
        _f("rewardCost", "number", "points"),
        *_WHO,
        _f("userInput", "string", "present if the reward takes input", optional=True),
        _f("status", "string", "e.g. unfulfilled"),
        _f("redeemedAt", "string", "ISO 8601"),
    ),
    _event(
        "channel.update",
        "Channel",
        "The channel's settings or profile changed.",
        _f("userId", "string", "the channel id"),
        _f("username", "string", ""),
        _f("displayName", "string", ""),
        _f("updatedAt", "string", "ISO 8601"),
        transports=_WEBHOOKS_ONLY,
    ),
    _event(
        "channel.hype_train.begin",
        "Channel",
        "Listed by the spec; the platform has no Hype Train.",
        transports=frozenset({EVENTS_API}),
        never_fires=True,
    ),
    _event(
        "channel.hype_train.progress",
        "Channel",
        "Listed by the spec; the platform has no Hype Train.",
        transports=frozenset({EVENTS_API}),
        never_fires=True,
    ),
    _event(
        "channel.hype_train.end",
        "Channel",
        "Listed by the spec; the platform has no Hype Train.",
        transports=frozenset({EVENTS_API}),
        never_fires=True,
    ),
    # ---------------------------------------------------------------- Interaction
    _event(
        "channel.poll.begin",
        "Interaction",
        "A poll started.",
        *_POLL,
        _f("startedAt", "string", "ISO 8601"),
        _f("endsAt", "string|null", "ISO 8601"),
        _f("durationSeconds", "number", "how long the poll runs"),
        public=True,
    ),
    _event(
        "channel.poll.end",
        "Interaction",
        "A poll ended (with its final votes).",
        *_POLL,
        _f("totalVotes", "number", "votes cast"),
        _f("startedAt", "string", "ISO 8601"),
        _f("endedAt", "string", "ISO 8601"),
        public=True,
    ),
    _event(
        "channel.giveaway.begin",
        "Interaction",
        "A giveaway opened.",
        *_GIVEAWAY,
        _f("subscribersOnly", "boolean", "only the channel's subscribers may enter"),
        _f("startedAt", "string", "ISO 8601"),
        _f("endsAt", "string|null", "ISO 8601; null: open until ended or drawn"),
        public=True,
    ),
    _event(
        "channel.giveaway.end",
        "Interaction",
        "A giveaway ended.",
        *_GIVEAWAY,
        _f("winners", "array", "[{userId, username, displayName}]"),
        _f("entries", "number", "how many entered"),
        _f("endedAt", "string", "ISO 8601"),
        public=True,
    ),
    _event(
        "channel.prediction.begin",
        "Interaction",
        "A prediction opened.",
        *_PREDICTION,
        _f("startedAt", "string", "ISO 8601"),
        _f("locksAt", "string", "ISO 8601"),
        public=True,
    ),
    _event(
        "channel.prediction.lock",
        "Interaction",
        "A prediction stopped taking entries.",
        *_PREDICTION,
        _f("lockedAt", "string", "ISO 8601"),
        public=True,
    ),
    _event(
        "channel.prediction.end",
        "Interaction",
        "A prediction was resolved or cancelled.",
        *_PREDICTION,
        _f("winningOutcomeId", "string|null", "null when cancelled"),
        _f("status", "string", "resolved or cancelled"),
        _f("endedAt", "string", "ISO 8601"),
        public=True,
    ),
    _event("channel.goal.progress", "Interaction", "A goal's amount changed.", *_GOAL, public=True),
    _event(
        "channel.goal.completed",
        "Interaction",
        "A goal was reached (once per period).",
        *_GOAL,
        _f("completedAt", "string", "ISO 8601"),
        public=True,
    ),
    _event(
        "channel.timer.update",
        "Interaction",
        "A timer or subathon changed (not per tick).",
        _f("timerId", "string", "id of the timer"),
        _f("title", "string", "the timer's label"),
        _f("status", "string", "running, paused or ended"),
        _f("action", "string", "started, paused, resumed, ended, reset or time_added"),
        _f("durationSeconds", "number", "the configured duration (what reset restores)"),
        _f("remainingSeconds", "number", ""),
        _f("endsAt", "string|null", "ISO 8601"),
        _f("addedSeconds", "number", "time_added only: seconds added (negative: removed)", optional=True),
        _f("reason", "string", "time_added only: manual, subscription, gift or volts", optional=True),
        public=True,
    ),
    # ---------------------------------------------------------------- User (webhooks only)
    _event(
        "user.follow",
        "User",
        "The app owner followed someone.",
        *_WHO,
        _f("followedUserId", "string", ""),
        _f("followedUsername", "string", ""),
        _f("followedDisplayName", "string", ""),
        _f("followedAt", "string", "ISO 8601"),
        transports=_WEBHOOKS_ONLY,
    ),
    _event(
        "user.unfollow",
        "User",
        "The app owner unfollowed someone.",
        *_WHO,
        _f("followedUserId", "string", ""),
        _f("followedUsername", "string", ""),
        _f("followedDisplayName", "string", ""),
        _f("unfollowedAt", "string", "ISO 8601"),
        transports=_WEBHOOKS_ONLY,
    ),
    _event(
        "user.authorization.grant",
        "User",
        "A user authorised the app. Sent to the authorised app's owner (whose channel the"
        " event belongs to): that app's webhooks and the owner's Events API connections,"
        " never to the authorising user's own channel.",
        *_WHO,
        _f("clientId", "string", "the app's client id"),
        _f("appName", "string", "the app's name"),
        _f("scopes", "string[]", "the real scopes the grant holds"),
        _f("grantedAt", "string", "ISO 8601"),
        transports=_BOTH,
    ),
    _event(
        "user.authorization.revoke",
        "User",
        "A user revoked the app's access (or the app was deleted). Sent like"
        " user.authorization.grant: to the authorised app's webhooks and its owner's Events API"
        " connections, never to the authorising user's own channel.",
        *_WHO,
        _f("clientId", "string", "the app's client id"),
        _f("appName", "string", "the app's name"),
        _f("scopes", "string[]", "the real scopes the revoked grants held"),
        _f("revokedAt", "string", "ISO 8601"),
        transports=_BOTH,
    ),
    # ---------------------------------------------------------------- Chat
    _event(
        "chat.message",
        "Chat",
        "A chat message, regular or card.",
        _f("messageId", "string", ""),
        _f("channelId", "string", ""),
        *_WHO,
        _f("message", "string", "text"),
        _f("badges", "string[]", "badge slugs"),
        _f("isMod", "boolean", ""),
        _f("isVip", "boolean", ""),
        _f("isSubscriber", "boolean", ""),
        _f("timestamp", "string", "ISO 8601"),
        _f("subscriberMonths", "number", "tenure when subscribed", optional=True),
        _f("color", "string", "accent colour, hex", optional=True),
        _f("mentions", "array", "[{username, userId, displayName}]", optional=True),
        _f("replyTo", "object", "{messageId, userId, username, snippet}", optional=True),
        _f("effect", "string", "glow, galaxy, rainbow or gigantify", optional=True),
        _f("effectColor", "string", "#rrggbb, with glow", optional=True),
        _f("card", "object", "{type, payload} on card messages", optional=True),
        _f("isSystem", "boolean", "true for system or card messages", optional=True),
        _f("emotes", "array", "[{code, url}] of the message's :code: emotes that resolved", optional=True),
        _TEST,
        public=True,
        webhook_scope="chat:read",
    ),
)

BY_NAME: Final[dict[str, EventType]] = {entry.name: entry for entry in CATALOGUE}

# Who really emits each event: event name -> the volthub module that calls its builder
# (below) and emits the result. `/api/events/types` reports `emitted: true` exactly for these
# (and for a legacy alias of one of them). tests/protocol/test_catalogue.py parses the source:
# each named module must call the event's builder, and no other module (the sandbox aside)
# may call a builder of an event it is not listed for, so the flag errs neither way. Add a
# row when a producer lands, in the same change.
PRODUCERS: Final[dict[str, str]] = {
    "channel.follow": "volthub.services.accounts",
    "user.follow": "volthub.services.accounts",
    "user.unfollow": "volthub.services.accounts",
    "user.authorization.grant": "volthub.services.oauth",
    "user.authorization.revoke": "volthub.services.oauth",
    "chat.message": "volthub.hub.components.chat",
    "channel.ban": "volthub.hub.components.chat",
    "channel.unban": "volthub.hub.components.chat",
    "stream.online": "volthub.services.streams",
    "stream.offline": "volthub.services.streams",
    "stream.update": "volthub.services.streams",
    "channel.update": "volthub.services.streams",
    "channel.poll.begin": "volthub.hub.components.polls",
    "channel.poll.end": "volthub.hub.components.polls",
    "channel.giveaway.begin": "volthub.hub.components.giveaways",
    "channel.giveaway.end": "volthub.hub.components.giveaways",
    "channel.prediction.begin": "volthub.hub.components.predictions",
    "channel.prediction.lock": "volthub.hub.components.predictions",
    "channel.prediction.end": "volthub.hub.components.predictions",
    "channel.goal.progress": "volthub.hub.components.goals",
    "channel.goal.completed": "volthub.hub.components.goals",
    "channel.timer.update": "volthub.hub.components.timers",
    "channel.volts": "volthub.services.volts",
    "channel.raid": "volthub.services.raids",
    "channel.subscribe": "volthub.services.subscriptions",
    "channel.subscription.gift": "volthub.services.subscriptions",
    "channel.subscription.end": "volthub.services.subscriptions",
    "channel.moderator.add": "volthub.hub.components.roles",
    "channel.moderator.remove": "volthub.hub.components.roles",
    "channel.channel_points_redemption": "volthub.services.channel_points",
}

EVENTS_API_EVENTS: Final[frozenset[str]] = frozenset(e.name for e in CATALOGUE if EVENTS_API in e.transports)
PUBLIC_EVENTS: Final[frozenset[str]] = frozenset(e.name for e in CATALOGUE if e.public)
WEBHOOK_EVENTS: Final[frozenset[str]] = frozenset(e.name for e in CATALOGUE if WEBHOOKS in e.transports)


def _webhook_groups() -> dict[str, tuple[str, ...]]:
    groups: dict[str, list[str]] = {}
    for entry in CATALOGUE:
        if WEBHOOKS in entry.transports:
            groups.setdefault(entry.group, []).append(entry.name)
    return {group: tuple(names) for group, names in groups.items()}


# The webhook view, in the shape volthub.protocol.catalogue exposes it.
WEBHOOK_EVENT_GROUPS: Final[dict[str, tuple[str, ...]]] = _webhook_groups()
ALIASES: Final[dict[str, str]] = {e.name: e.alias_of for e in CATALOGUE if e.alias_of is not None}
REQUIRED_SCOPE: Final[dict[str, str]] = {e.name: e.webhook_scope for e in CATALOGUE if e.webhook_scope}


# The sandbox's test event types and the event each sends.
SANDBOX_EVENTS: Final[dict[str, str]] = {
    "subscription": "channel.subscribe",
    "gift_subscription": "channel.subscription.gift",
    "follow": "channel.follow",
    "volt_tip": "channel.volts",
    "raid": "channel.raid",
    "chat_message": "chat.message",
}
SANDBOX_NAMES: Final[frozenset[str]] = frozenset(SANDBOX_EVENTS.values())

# What the Events API may carry: its names, less those that never fire (hype train). Not
# narrowed to PRODUCERS: the fan-out is transport (sandbox events of producer-less types
# travel it too), and the producer table is held true by tests, not at runtime.
_DELIVERED: Final[frozenset[str]] = frozenset(
    e.name for e in CATALOGUE if EVENTS_API in e.transports and not e.never_fires
)


def delivered_over_events_api(name: str) -> bool:
    return name in _DELIVERED


def is_emitted(name: str) -> bool:
    """Something on the platform really emits it: it has a producer, or it is a legacy alias
    of an event that has one."""
    entry = BY_NAME.get(name)
    if entry is None or entry.never_fires:
        return False
    return (entry.alias_of or name) in PRODUCERS


def is_public(name: str) -> bool:
    """Anonymous subscribers of a channel receive it (otherwise: the owner only)."""
    return name in PUBLIC_EVENTS


def unknown_events_api_names(names: Iterable[str]) -> list[str]:
    """Names that are not Events API events, in the order given, without repeats."""
    return list(dict.fromkeys(name for name in names if name not in EVENTS_API_EVENTS))


def document() -> dict[str, Any]:
    """The body of GET /api/events/types."""
    groups = list(dict.fromkeys(entry.group for entry in CATALOGUE))
    return {
        "groups": groups,
        "types": [entry.document() for entry in CATALOGUE],
    }


# --- the webhook view: subscription names, legacy aliases ---------------------------------


def unknown_events(names: Iterable[str]) -> list[str]:
    """The names that are not in the catalogue, in the order given, without repeats."""
    return list(dict.fromkeys(name for name in names if name not in WEBHOOK_EVENTS))


def subscribed_names(event_name: str) -> tuple[str, ...]:
    """Subscription names that receive a platform event: itself and its legacy aliases."""
    if event_name not in WEBHOOK_EVENTS or event_name in ALIASES:
        return ()
    return (event_name, *(alias for alias, real in ALIASES.items() if real == event_name))


def delivery_name(event_name: str, subscribed: Iterable[str]) -> str | None:
    """The name a webhook subscribed to ``subscribed`` receives ``event_name`` under, or
    None when it does not receive it. Subscribed to both a name and its alias, the webhook
    gets one delivery, under the current name (receivers dedupe by event id anyway)."""
    wanted = set(subscribed)
    for name in subscribed_names(event_name):
        if name in wanted:
            return name
    return None


# --- builders: the people in payloads ------------------------------------------------------


class Identified(Protocol):
    """Anything that names a user: a stored user, a chat member, ..."""

    @property
    def id(self) -> str: ...
    @property
    def username(self) -> str: ...
    @property
    def display_name(self) -> str: ...


class Person(NamedTuple):
    """A user as payloads show them: ``{userId, username, displayName}``."""

    user_id: str
    username: str
    display_name: str

    @classmethod
    def of(cls, user: Identified) -> Person:
        return cls(user.id, user.username, user.display_name)

    def fields(self) -> dict[str, str]:
        return {"userId": self.user_id, "username": self.username, "displayName": self.display_name}


def _tested(data: dict[str, Any], is_test: bool) -> dict[str, Any]:
    """Sandbox events carry ``isTest: true``; real ones leave the key out."""
    if is_test:
        data["isTest"] = True
    return data


# --- builders: streams (volthub.services.streams) ------------------------------------------


def _broadcaster(channel: Person) -> dict[str, str]:
    return {"userId": channel.user_id, "username": channel.username}


def stream_online(
    *, stream_id: str, channel: Person, title: str, category: str | None, started_at: str
) -> dict[str, Any]:
    return {
        "streamId": stream_id,
        **_broadcaster(channel),
        "title": title,
        "category": category,
        "startedAt": started_at,
    }


def stream_offline(*, stream_id: str, channel: Person, ended_at: str, vod_id: str | None = None) -> dict[str, Any]:
    data = {"streamId": stream_id, **_broadcaster(channel), "endedAt": ended_at}
    if vod_id is not None:
        data["vodId"] = vod_id
    return data


def stream_update(
    *,
    channel: Person,
    title: str,
    category: str | None,
    tags: Iterable[str],
    channel_tags: Iterable[str],
    content_warnings: Iterable[str],
) -> dict[str, Any]:
    return {
        **_broadcaster(channel),
        "title": title,
        "category": category,
        "tags": list(tags),
        "channelTags": list(channel_tags),
        "contentWarnings": list(content_warnings),
    }


def channel_update(*, channel: Person, updated_at: str) -> dict[str, Any]:
    return {**channel.fields(), "updatedAt": updated_at}


# --- builders: follows (volthub.services.accounts) -----------------------------------------


def channel_follow(*, follower: Person, followed_at: str, is_test: bool = False) -> dict[str, Any]:
    return _tested({**follower.fields(), "followedAt": followed_at}, is_test)


def _followed(user: Person) -> dict[str, str]:
    return {
        "followedUserId": user.user_id,
        "followedUsername": user.username,
        "followedDisplayName": user.display_name,
    }


def user_follow(*, follower: Person, followed: Person, followed_at: str) -> dict[str, Any]:
    return {**follower.fields(), **_followed(followed), "followedAt": followed_at}


def user_unfollow(*, follower: Person, followed: Person, unfollowed_at: str) -> dict[str, Any]:
    return {**follower.fields(), **_followed(followed), "unfollowedAt": unfollowed_at}


# --- builders: app authorisations (volthub.services.oauth) ---------------------------------


def user_authorization_grant(
    *, user: Person, client_id: str, app_name: str, scopes: Iterable[str], granted_at: str
) -> dict[str, Any]:
    return {
        **user.fields(),
        "clientId": client_id,
        "appName": app_name,
        "scopes": list(scopes),
        "grantedAt": granted_at,
    }


def user_authorization_revoke(
    *, user: Person, client_id: str, app_name: str, scopes: Iterable[str], revoked_at: str
) -> dict[str, Any]:
    return {
        **user.fields(),
        "clientId": client_id,
        "appName": app_name,
        "scopes": list(scopes),
        "revokedAt": revoked_at,
    }


# --- builders: subscriptions, Volts, raids (their services and the sandbox) ---------------


def channel_subscribe(
    *,
    subscriber: Person,
    tier: str,
    months: int,
    message: str | None,
    subscribed_at: str,
    is_gift: bool = False,
    is_test: bool = False,
) -> dict[str, Any]:
    data = {
        **subscriber.fields(),
        "tier": tier,
        "isGift": is_gift,
        "months": months,
        "message": message,
        "subscribedAt": subscribed_at,
    }
    return _tested(data, is_test)


def channel_subscription_gift(
    *,
    gifter: Person,
    tier: str,
    quantity: int,
    gifted_at: str,
    amount: int | None = None,
    is_anonymous: bool = False,
    recipients: Iterable[Person] | None = None,
    is_test: bool = False,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        **gifter.fields(),
        "tier": tier,
        "quantity": quantity,
        "isAnonymous": is_anonymous,
        "giftedAt": gifted_at,
    }
    if amount is not None:
        data["amount"] = amount
    if recipients is not None:
        data["recipients"] = [person.fields() for person in recipients]
    return _tested(data, is_test)


def channel_subscription_end(
    *,
    subscriber: Person,
    tier: str,
    gifter: Person | None,
    reason: str,
    ended_at: str,
    expires_at: str,
) -> dict[str, Any]:
    """`reason` is canceled or expired; `gifter` None for a bought subscription."""
    return {
        **subscriber.fields(),
        "tier": tier,
        "isGift": gifter is not None,
        "gifter": None if gifter is None else gifter.fields(),
        "reason": reason,
        "endedAt": ended_at,
        "expiresAt": expires_at,
    }


def channel_channel_points_redemption(
    *,
    redemption_id: str,
    reward_id: str,
    reward_title: str,
    reward_cost: int,
    redeemer: Person,
    user_input: str | None = None,
    status: str,
    redeemed_at: str,
) -> dict[str, Any]:
    """``userInput`` only when the redeemer gave some."""
    data: dict[str, Any] = {
        "redemptionId": redemption_id,
        "rewardId": reward_id,
        "rewardTitle": reward_title,
        "rewardCost": reward_cost,
        **redeemer.fields(),
    }
    if user_input is not None:
        data["userInput"] = user_input
    data["status"] = status
    data["redeemedAt"] = redeemed_at
    return data


def channel_volts(
    *, sender: Person, amount: int, message: str | None, sent_at: str, is_test: bool = False
) -> dict[str, Any]:
    """Also the payload of its legacy webhook name ``channel.cheer``."""
    return _tested({**sender.fields(), "amount": amount, "message": message, "sentAt": sent_at}, is_test)


def channel_raid(
    *,
    raider: Person,
    target_id: str,
    target_username: str,
    viewers: int,
    raided_at: str,
    direction: str = "incoming",
    is_test: bool = False,
) -> dict[str, Any]:
    """``raider`` is the raiding channel's user (a channel's id is its user's id)."""
    data = {
        "direction": direction,
        "fromChannelId": raider.user_id,
        "fromUsername": raider.username,
        "fromDisplayName": raider.display_name,
        "toChannelId": target_id,
        "toUsername": target_username,
        "viewers": viewers,
        "raidedAt": raided_at,
    }
    return _tested(data, is_test)


# --- builders: chat (volthub.hub.components.chat) ------------------------------------------


def chat_message(
    *,
    message_id: str,
    channel_id: str,
    sender: Person,
    text: str,
    timestamp: str,
    badges: Iterable[str] = (),
    is_mod: bool = False,
    is_vip: bool = False,
    subscriber_months: int | None = None,
    mentions: list[dict[str, str]] | None = None,
    reply_to: dict[str, Any] | None = None,
    effect: str | None = None,
    effect_color: str | None = None,
    card: dict[str, Any] | None = None,
    is_system: bool = False,
    is_test: bool = False,
    emotes: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Optional members appear only when they have a value; a card message is
    always a system message. `subscriber_months` None: not a subscriber."""
    data: dict[str, Any] = {
        "messageId": message_id,
        "channelId": channel_id,
        **sender.fields(),
        "message": text,
        "badges": list(badges),
        "isMod": is_mod,
        "isVip": is_vip,
        "isSubscriber": subscriber_months is not None,
        "timestamp": timestamp,
    }
    optional = {
        "subscriberMonths": subscriber_months,
        "mentions": mentions or None,
        "replyTo": reply_to,
        "effect": effect,
        "effectColor": effect_color,
        "card": card,
        "isSystem": True if is_system or card is not None else None,
        # The message's `:code:` emotes that resolved, [{code, url}] (emote resolver).
        "emotes": emotes or None,
    }
    data.update({key: value for key, value in optional.items() if value is not None})
    return _tested(data, is_test)


def channel_ban(
    *,
    user: Person,
    moderator: Person,
    reason: str | None,
    is_permanent: bool,
    banned_at: str,
    ends_at: str | None,
    duration_seconds: int | None = None,
) -> dict[str, Any]:
    """A ban (`is_permanent`) or a timeout; a timeout also carries `durationSeconds`."""
    data: dict[str, Any] = {
        **user.fields(),
        "moderator": moderator.fields(),
        "reason": reason,
        "isPermanent": is_permanent,
        "bannedAt": banned_at,
        "endsAt": ends_at,
    }
    if not is_permanent:
        data["durationSeconds"] = duration_seconds
    return data


def channel_unban(*, user: Person, moderator: Person, was_permanent: bool, unbanned_at: str) -> dict[str, Any]:
    return {**user.fields(), "moderator": moderator.fields(), "wasPermanent": was_permanent, "unbannedAt": unbanned_at}


# --- builders: interactive control (volthub.hub.components.{polls,giveaways,...}) ----------


def channel_poll_begin(
    *, poll_id: str, title: str, choices: list[dict[str, Any]], started_at: str, ends_at: str, duration_seconds: int
) -> dict[str, Any]:
    return {
        "pollId": poll_id,
        "title": title,
        "choices": choices,
        "startedAt": started_at,
        "endsAt": ends_at,
        "durationSeconds": duration_seconds,
    }


def channel_poll_end(
    *, poll_id: str, title: str, choices: list[dict[str, Any]], total_votes: int, started_at: str, ended_at: str
) -> dict[str, Any]:
    return {
        "pollId": poll_id,
        "title": title,
        "choices": choices,
        "totalVotes": total_votes,
        "startedAt": started_at,
        "endedAt": ended_at,
    }


def channel_giveaway_begin(
    *, giveaway_id: str, title: str, subscribers_only: bool, started_at: str, ends_at: str | None
) -> dict[str, Any]:
    return {
        "giveawayId": giveaway_id,
        "title": title,
        "subscribersOnly": subscribers_only,
        "startedAt": started_at,
        "endsAt": ends_at,
    }


def channel_giveaway_end(
    *, giveaway_id: str, title: str, winners: list[Person], entries: int, ended_at: str
) -> dict[str, Any]:
    return {
        "giveawayId": giveaway_id,
        "title": title,
        "winners": [winner.fields() for winner in winners],
        "entries": entries,
        "endedAt": ended_at,
    }


def channel_prediction_begin(
    *, prediction_id: str, title: str, outcomes: list[dict[str, Any]], started_at: str, locks_at: str
) -> dict[str, Any]:
    return {
        "predictionId": prediction_id,
        "title": title,
        "outcomes": outcomes,
        "startedAt": started_at,
        "locksAt": locks_at,
    }


def channel_prediction_lock(
    *, prediction_id: str, title: str, outcomes: list[dict[str, Any]], locked_at: str
) -> dict[str, Any]:
    return {"predictionId": prediction_id, "title": title, "outcomes": outcomes, "lockedAt": locked_at}


def channel_prediction_end(
    *,
    prediction_id: str,
    title: str,
    outcomes: list[dict[str, Any]],
    status: str,
    ended_at: str,
    winning_outcome_id: str | None = None,
) -> dict[str, Any]:
    """`status` is resolved or cancelled; a cancelled prediction has no winning outcome."""
    return {
        "predictionId": prediction_id,
        "title": title,
        "outcomes": outcomes,
        "winningOutcomeId": winning_outcome_id,
        "status": status,
        "endedAt": ended_at,
    }


def _goal(goal_id: str, type_: str, title: str, current: int, target: int, period: str) -> dict[str, Any]:
    return {
        "goalId": goal_id,
        "type": type_,
        "description": title,
        "currentAmount": current,
        "targetAmount": target,
        "period": period,
    }


def channel_goal_progress(
    *, goal_id: str, goal_type: str, title: str, current: int, target: int, period: str
) -> dict[str, Any]:
    return _goal(goal_id, goal_type, title, current, target, period)


def channel_goal_completed(
    *, goal_id: str, goal_type: str, title: str, current: int, target: int, period: str, completed_at: str
) -> dict[str, Any]:
    return {**_goal(goal_id, goal_type, title, current, target, period), "completedAt": completed_at}


def channel_timer_update(
    *,
    timer_id: str,
    title: str,
    status: str,
    action: str,
    duration_seconds: int,
    remaining_seconds: int,
    ends_at: str | None,
    added_seconds: int | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "timerId": timer_id,
        "title": title,
        "status": status,
        "action": action,
        "durationSeconds": duration_seconds,
        "remainingSeconds": remaining_seconds,
        "endsAt": ends_at,
    }
    if added_seconds is not None:
        data["addedSeconds"] = added_seconds
        data["reason"] = reason or "manual"
    return data


# --- builders: channel roles (volthub.hub.components.roles) --------------------------------


def channel_moderator_add(*, user: Person, moderator: Person, added_at: str) -> dict[str, Any]:
    """`moderator` is who granted the role (the broadcaster)."""
    return {**user.fields(), "moderator": moderator.fields(), "addedAt": added_at}


def channel_moderator_remove(*, user: Person, moderator: Person, removed_at: str) -> dict[str, Any]:
    return {**user.fields(), "moderator": moderator.fields(), "removedAt": removed_at}
