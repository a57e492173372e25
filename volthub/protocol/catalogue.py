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

Pure data and functions (sans-IO), importable from anywhere. The builders are written in
:mod:`volthub.protocol.payloads` and re-exported here, so producers call
``catalogue.<builder>`` and a test can check each against the producer table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

# The builders, re-exported: producers call them as `catalogue.<builder>`.
# isort: off
from volthub.protocol.payloads import (
    Identified as Identified,
    Person as Person,
    channel_ban as channel_ban,
    channel_channel_points_redemption as channel_channel_points_redemption,
    channel_follow as channel_follow,
    channel_giveaway_begin as channel_giveaway_begin,
    channel_giveaway_end as channel_giveaway_end,
    channel_goal_completed as channel_goal_completed,
    channel_goal_progress as channel_goal_progress,
    channel_moderator_add as channel_moderator_add,
    channel_moderator_remove as channel_moderator_remove,
    channel_poll_begin as channel_poll_begin,
    channel_poll_end as channel_poll_end,
    channel_prediction_begin as channel_prediction_begin,
    channel_prediction_end as channel_prediction_end,
    channel_prediction_lock as channel_prediction_lock,
    channel_raid as channel_raid,
    channel_subscribe as channel_subscribe,
    channel_subscription_end as channel_subscription_end,
    channel_subscription_gift as channel_subscription_gift,
    channel_timer_update as channel_timer_update,
    channel_unban as channel_unban,
    channel_update as channel_update,
    channel_volts as channel_volts,
    chat_message as chat_message,
    stream_offline as stream_offline,
    stream_online as stream_online,
    stream_update as stream_update,
    user_authorization_grant as user_authorization_grant,
    user_authorization_revoke as user_authorization_revoke,
    user_follow as user_follow,
    user_unfollow as user_unfollow,
)
# isort: on

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
            "sandbox": self.name in SANDBOX_NAMES or is_emitted(self.name),
            "public": self.public,
            "aliasOf": self.alias_of,
            "webhookScope": self.webhook_scope,
            "fields": [field.document() for field in self.fields],
        }


def _f(name: str, type_: str, description: str, optional: bool = False) -> PayloadField:
    return PayloadField(name, type_, description, optional)


def _at(name: str) -> PayloadField:
    """A moment: an ISO 8601 timestamp."""
    return _f(name, "string", "ISO 8601")


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
    _f("options", "array", "[{id, title, votes}], the same shape as a poll's options in responses"),
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
_VOLTS_SENT = (
    *_WHO,
    _f("amount", "number", "Volts sent"),
    _f("message", "string|null", "the sender's message"),
    _at("sentAt"),
)
_FOLLOWED = (
    _f("followedUserId", "string", "id of the followed user"),
    _f("followedUsername", "string", "the followed user's username"),
    _f("followedDisplayName", "string", "the followed user's display name"),
)
_AUTHORISED_APP = (
    *_WHO,
    _f("clientId", "string", "the app's client id"),
    _f("appName", "string", "the app's name"),
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
        _at("startedAt"),
        public=True,
    ),
    _event(
        "stream.offline",
        "Stream",
        "The channel's stream ended.",
        *_STREAM,
        _at("endedAt"),
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
        _at("followedAt"),
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
        _at("subscribedAt"),
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
        _at("giftedAt"),
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
        _at("endedAt"),
        _at("expiresAt"),
        transports=_WEBHOOKS_ONLY,
    ),
    _event(
        "channel.volts",
        "Channel",
        "Someone sent Volts to the channel.",
        *_VOLTS_SENT,
        _TEST,
    ),
    _event(
        "channel.cheer",
        "Channel",
        "Legacy webhook name of channel.volts (same payload).",
        *_VOLTS_SENT,
        transports=_WEBHOOKS_ONLY,
        alias_of="channel.volts",
    ),
    _event(
        "channel.raid",
        "Channel",
        "A raid arrived at (or left) the channel.",
        _f("direction", "string", "incoming or outgoing"),
        _f("fromChannelId", "string", "the raiding channel"),
        _f("fromUsername", "string", "the raiding channel's username"),
        _f("fromDisplayName", "string", "the raiding channel's display name"),
        _f("toChannelId", "string", "the raided channel"),
        _f("toUsername", "string", "the raided channel's username"),
        _f("viewers", "number", "viewers brought along"),
        _at("raidedAt"),
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
        _at("bannedAt"),
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
        _at("unbannedAt"),
    ),
    _event(
        "channel.moderator.add",
        "Channel",
        "A user was made a moderator.",
        *_WHO,
        _MODERATOR,
        _at("addedAt"),
    ),
    _event(
        "channel.moderator.remove",
        "Channel",
        "A moderator was removed.",
        *_WHO,
        _MODERATOR,
        _at("removedAt"),
    ),
    _event(
        "channel.channel_points_redemption",
        "Channel",
        "A channel-points reward was redeemed.",
        _f("redemptionId", "string", "id of the redemption"),
        _f("rewardId", "string", "matches a reward item id"),
        _f("rewardTitle", "string", "the reward's title"),
        _f("rewardCost", "number", "points"),
        *_WHO,
        _f("userInput", "string", "present if the reward takes input", optional=True),
        _f("status", "string", "e.g. unfulfilled"),
        _at("redeemedAt"),
    ),
    _event(
        "channel.update",
        "Channel",
        "The channel's settings or profile changed.",
        _f("userId", "string", "the channel id"),
        _f("username", "string", "the channel's username"),
        _f("displayName", "string", "the channel's display name"),
        _at("updatedAt"),
        transports=_WEBHOOKS_ONLY,
    ),
    *(
        _event(
            f"channel.hype_train.{stage}",
            "Channel",
            "Listed by the spec; the platform has no Hype Train.",
            transports=frozenset({EVENTS_API}),
            never_fires=True,
        )
        for stage in ("begin", "progress", "end")
    ),
    # ---------------------------------------------------------------- Interaction
    _event(
        "channel.poll.begin",
        "Interaction",
        "A poll started.",
        *_POLL,
        _at("startedAt"),
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
        _at("startedAt"),
        _at("endedAt"),
        public=True,
    ),
    _event(
        "channel.giveaway.begin",
        "Interaction",
        "A giveaway opened.",
        *_GIVEAWAY,
        _f("subscribersOnly", "boolean", "only the channel's subscribers may enter"),
        _at("startedAt"),
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
        _at("endedAt"),
        public=True,
    ),
    _event(
        "channel.prediction.begin",
        "Interaction",
        "A prediction opened.",
        *_PREDICTION,
        _at("startedAt"),
        _at("locksAt"),
        public=True,
    ),
    _event(
        "channel.prediction.lock",
        "Interaction",
        "A prediction stopped taking entries.",
        *_PREDICTION,
        _at("lockedAt"),
        public=True,
    ),
    _event(
        "channel.prediction.end",
        "Interaction",
        "A prediction was resolved or cancelled.",
        *_PREDICTION,
        _f("winningOutcomeId", "string|null", "null when cancelled"),
        _f("status", "string", "resolved or cancelled"),
        _at("endedAt"),
        public=True,
    ),
    _event("channel.goal.progress", "Interaction", "A goal's amount changed.", *_GOAL, public=True),
    _event(
        "channel.goal.completed",
        "Interaction",
        "A goal was reached (once per period).",
        *_GOAL,
        _at("completedAt"),
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
        _f("remainingSeconds", "number", "seconds left on the timer"),
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
        *_FOLLOWED,
        _at("followedAt"),
        transports=_WEBHOOKS_ONLY,
    ),
    _event(
        "user.unfollow",
        "User",
        "The app owner unfollowed someone.",
        *_WHO,
        *_FOLLOWED,
        _at("unfollowedAt"),
        transports=_WEBHOOKS_ONLY,
    ),
    _event(
        "user.authorization.grant",
        "User",
        "A user authorised the app. Sent to the authorised app's owner (whose channel the"
        " event belongs to): that app's webhooks and the owner's Events API connections,"
        " never to the authorising user's own channel.",
        *_AUTHORISED_APP,
        _f("scopes", "string[]", "the real scopes the grant holds"),
        _at("grantedAt"),
        transports=_BOTH,
    ),
    _event(
        "user.authorization.revoke",
        "User",
        "A user revoked the app's access (or the app was deleted). Sent like"
        " user.authorization.grant: to the authorised app's webhooks and its owner's Events API"
        " connections, never to the authorising user's own channel.",
        *_AUTHORISED_APP,
        _f("scopes", "string[]", "the real scopes the revoked grants held"),
        _at("revokedAt"),
        transports=_BOTH,
    ),
    # ---------------------------------------------------------------- Chat
    _event(
        "chat.message",
        "Chat",
        "A chat message, regular or card.",
        _f("messageId", "string", "id of the message"),
        _f("channelId", "string", "the channel it was sent in"),
        *_WHO,
        _f("message", "string", "text"),
        _f("badges", "string[]", "badge slugs"),
        _f("isMod", "boolean", "the sender moderates the channel"),
        _f("isVip", "boolean", "the sender is a VIP of the channel"),
        _f("isSubscriber", "boolean", "the sender subscribes to the channel"),
        _at("timestamp"),
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
