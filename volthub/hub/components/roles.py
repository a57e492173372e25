"""Channel roles: the channel actor's
VIP and moderator component, sans-IO.

A grant, a removal and the end of an expired grant run in the actor's transaction, so the
member's chat flags, badges and moderation rights change with the commit (chat reads a
member's standing from the store on every command). Each emits, through the one publish
path, `channel.moderator.add` / `channel.moderator.remove` for moderators, and for every
role the bus-only `BADGES_CHANGED` message with the member's badges as chat now computes
them: the Events API pushes it to the member's open sockets (http/events/registry.py).

Expiry is not an actor deadline (a grant may run for months and would keep its actor
alive): the role-expiry service (services/channel_roles.py) sends `ExpireRoles` to the
channel when one is due, and the store ends due grants with a guarded delete, so with
several processes each grant ends once.

The broadcaster holds no grantable role. Nothing here is cached: every fact is read
through the store, so the component is always idle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from volthub.hub.clock import iso8601
from volthub.hub.components.base import Dispatcher, Emitted, Outcome, Refusal, Refused, Store, handles
from volthub.hub.components.chat_rules import Standing, badges
from volthub.protocol import catalogue

ROLE_TYPES: Final = ("vip", "moderator")
# The latest `expiresAt` a grant may have, in days from now.
EXPIRY_MAX_DAYS: Final = 3650

# The bus-only message a role change causes. Not a platform event: the catalogue does not
# know the name, so the Events API fan-out, the resume buffers and the webhook outbox all
# pass it by (tests/hub/components/test_roles.py holds that true); on PostgreSQL it crosses
# processes through the relay like any event.
BADGES_CHANGED: Final = "internal.member.badges"


# --- records and commands ----------------------------------------------------------------------


@dataclass(frozen=True)
class Role:
    """One grant, as the roles routes show it."""

    member: Standing
    role: str
    granted_at: int
    expires_at: int | None

    def as_api(self) -> dict[str, Any]:
        return {
            "memberId": self.member.user_id,
            "username": self.member.username,
            "displayName": self.member.display_name,
            "roleType": self.role,
            "grantedAt": iso8601(self.granted_at),
            "expiresAt": None if self.expires_at is None else iso8601(self.expires_at),
        }


@dataclass(frozen=True)
class GrantRole:
    """Replies the `Role`. Exactly one of `member_id` and `username` names the member."""

    role: str
    member_id: str | None = None
    username: str | None = None
    expires_at: int | None = None  # epoch ms, in the future


@dataclass(frozen=True)
class RemoveRole:
    """Replies None."""

    member_id: str
    role: str


@dataclass(frozen=True)
class ExpireRoles:
    """Ends this channel's grants whose expiry has come; replies how many it ended."""


# --- the store port ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SaveRole:
    """Grant (or grant again, replacing the grant time and expiry)."""

    member_id: str
    role: str
    granted_at: int
    expires_at: int | None


@dataclass(frozen=True)
class EndedRole:
    """A grant that ended: removed (at the removal) or expired (at its expiresAt)."""

    member_id: str
    role: str
    ended_at: int


class RoleStore(Store, Protocol):
    def standing(self, user_id: str) -> Standing | None:
        """The user's standing in this channel as of now; None: no such user."""

    def user_id_of(self, username: str) -> str | None:
        """Any case."""

    def remove(self, member_id: str, role: str) -> bool:
        """Delete the grant; False when there was none (another request removed it)."""

    def expire_due(self, now_ms: int) -> list[EndedRole]:
        """The guarded end of every grant expired by `now_ms`: only the transaction that
        deleted a row gets it back."""


# --- pure rules --------------------------------------------------------------------------------


def _refuse(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> Refused:
    return Refused(Refusal(status, code, message, details))


def check_role(role: str) -> str:
    if role not in ROLE_TYPES:
        raise _refuse(400, "validation_error", "roleType must be vip or moderator", {"field": "roleType"})
    return role


def holding(member: Standing, role: str, held: bool) -> Standing:
    """The member's standing once the role is (or is no longer) held."""
    return replace(member, is_moderator=held) if role == "moderator" else replace(member, is_vip=held)


def badge_update(channel: Standing, member: Standing) -> dict[str, Any]:
    """What the member's open sockets are told (`channel:badges`): the flags and badges
    chat would put on their next message in this channel (the chat.message badge names)."""
    data: dict[str, Any] = {
        "channelId": channel.user_id,
        "channelUsername": channel.username,
        "userId": member.user_id,
        "badges": badges(member),
        "isMod": member.is_moderator,
        "isVip": member.is_vip,
        "isSubscriber": member.is_subscriber,
    }
    if member.subscriber_months is not None:
        data["subscriberMonths"] = member.subscriber_months
    return data


def _person(standing: Standing) -> catalogue.Person:
    return catalogue.Person(standing.user_id, standing.username, standing.display_name)


# --- the component -----------------------------------------------------------------------------


class RolesComponent(Dispatcher[RoleStore]):
    UNHANDLED = "roles do not handle"

    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id

    def load(self, store: RoleStore) -> None:
        """Nothing to keep: roles are read from the store where they matter."""

    def next_deadline(self) -> int | None:
        return None  # expiry comes as `ExpireRoles` from the role-expiry service

    def on_deadline(self, now_ms: int, store: RoleStore) -> Outcome:
        return Outcome()

    def is_idle(self) -> bool:
        return True

    # -- commands --

    @handles(GrantRole)
    def _grant(self, command: GrantRole, now_ms: int, store: RoleStore) -> Outcome:
        role = check_role(command.role)
        if command.expires_at is not None and command.expires_at <= now_ms:
            raise _refuse(400, "validation_error", "expiresAt must be in the future", {"field": "expiresAt"})
        if command.expires_at is not None and command.expires_at > now_ms + EXPIRY_MAX_DAYS * 86_400_000:
            raise _refuse(
                400,
                "validation_error",
                f"expiresAt must be at most {EXPIRY_MAX_DAYS} days ahead",
                {"field": "expiresAt", "maxDays": EXPIRY_MAX_DAYS},
            )
        member = self._member(command, store)
        if member.user_id == self.channel_id:
            raise _refuse(400, "invalid_member", "the broadcaster's role is not grantable")
        channel = self._channel(store)
        granted = Role(member, role, now_ms, command.expires_at)
        events = [Emitted(BADGES_CHANGED, badge_update(channel, holding(member, role, True)))]
        if role == "moderator":
            data = catalogue.channel_moderator_add(
                user=_person(member), moderator=_person(channel), added_at=iso8601(now_ms)
            )
            events.insert(0, Emitted("channel.moderator.add", data))
        return Outcome(granted, [SaveRole(member.user_id, role, now_ms, command.expires_at)], events)

    @handles(RemoveRole)
    def _remove(self, command: RemoveRole, now_ms: int, store: RoleStore) -> Outcome:
        role = check_role(command.role)
        if not store.remove(command.member_id, role):
            raise _refuse(404, "not_found", "this member does not hold that role")
        return Outcome(None, [], self._ended(store, [EndedRole(command.member_id, role, now_ms)]))

    @handles(ExpireRoles)
    def _expire(self, command: ExpireRoles, now_ms: int, store: RoleStore) -> Outcome:
        ended = store.expire_due(now_ms)
        return Outcome(len(ended), [], self._ended(store, ended))

    # -- helpers --

    def _member(self, command: GrantRole, store: RoleStore) -> Standing:
        named = command.member_id if command.member_id is not None else command.username
        user_id = command.member_id
        if user_id is None and command.username is not None:
            user_id = store.user_id_of(command.username)
        member = None if user_id is None else store.standing(user_id)
        if member is None:
            raise _refuse(404, "not_found", "no user has that memberId or username", {"member": named})
        return member

    def _channel(self, store: RoleStore) -> Standing:
        channel = store.standing(self.channel_id)
        if channel is None:  # the actor locked the channel's row: its user exists
            raise LookupError(f"channel {self.channel_id} has no user")
        return channel

    def _ended(self, store: RoleStore, ended: Iterable[EndedRole]) -> list[Emitted]:
        """The events of grants that ended, per member: each moderator removal, then the badges."""
        ended = list(ended)
        if not ended:
            return []
        channel = self._channel(store)
        events: list[Emitted] = []
        by_member: dict[str, list[EndedRole]] = {}
        for end in ended:
            by_member.setdefault(end.member_id, []).append(end)
        for member_id, ends in by_member.items():
            member = store.standing(member_id)
            if member is None:
                continue  # users are never deleted; nothing to tell anyone if one were
            for end in ends:
                member = holding(member, end.role, False)
                if end.role == "moderator":
                    data = catalogue.channel_moderator_remove(
                        user=_person(member), moderator=_person(channel), removed_at=iso8601(end.ended_at)
                    )
                    events.append(Emitted("channel.moderator.remove", data))
            events.append(Emitted(BADGES_CHANGED, badge_update(channel, member)))
        return events
