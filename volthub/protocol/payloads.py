"""The payload builders of the event catalogue: one function per event, named after it
(``channel.follow`` -> ``channel_follow``), that every producer and the sandbox call to build
the event's ``data``, so each payload shape is written once.

Producers call them through :mod:`volthub.protocol.catalogue`, which re-exports them next to
the fields each payload documents (a test holds each builder to its entry's fields, and
the catalogue's producer table to the modules that call them). Pure functions (sans-IO).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

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
    *, poll_id: str, title: str, options: list[dict[str, Any]], started_at: str, ends_at: str, duration_seconds: int
) -> dict[str, Any]:
    return {
        "pollId": poll_id,
        "title": title,
        "options": options,
        "startedAt": started_at,
        "endsAt": ends_at,
        "durationSeconds": duration_seconds,
    }


def channel_poll_end(
    *, poll_id: str, title: str, options: list[dict[str, Any]], total_votes: int, started_at: str, ended_at: str
) -> dict[str, Any]:
    return {
        "pollId": poll_id,
        "title": title,
        "options": options,
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
