"""Channel roles (spec §2.13, §4.10; DESIGN §4.1 "Channel roles"): VIP and moderator.

A grant or removal is one transaction with its event (`channel.moderator.add/remove` for
moderators). Chat reads a member's standing from the store on every message, so the very
next message carries the new flags and badges. The broadcaster holds no grantable role.
"""

from __future__ import annotations

from typing import Any

from volthub.hub.clock import Clock, iso8601, to_ms
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, Tx
from volthub.persistence import chat as chat_repo
from volthub.persistence import users as users_repo
from volthub.protocol import catalogue
from volthub.services.channels import ChannelNotFound, channel_by_id, channel_by_username

__all__ = ["ROLE_TYPES", "BroadcasterRole", "ChannelRoles", "RoleNotFound"]

ROLE_TYPES = ("vip", "moderator")


class BroadcasterRole(Exception):
    """The broadcaster's own role is not grantable."""


class UnknownMember(LookupError):
    """No user has the `memberId` or `username` a grant names; `str(error)` is that value."""


class RoleNotFound(Exception):
    pass


class PastExpiry(Exception):
    """expiresAt is not in the future."""


def _role_shape(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "memberId": row["user_id"],
        "username": row["username"],
        "displayName": row["display_name"],
        "roleType": row["role"],
        "grantedAt": iso8601(int(row["granted_at"])),
        "expiresAt": None if row["expires_at"] is None else iso8601(int(row["expires_at"])),
    }


def _roles(tx: Tx, channel_id: str, now_ms: int, user_id: str | None = None) -> list[dict[str, Any]]:
    sql = (
        "SELECT r.user_id, r.role, r.granted_at, r.expires_at, u.username, u.display_name FROM channel_roles r"
        " JOIN users u ON u.id = r.user_id WHERE r.channel_id = ? AND (r.expires_at IS NULL OR r.expires_at > ?)"
    )
    params: tuple[Any, ...] = (channel_id, now_ms)
    if user_id is not None:
        sql += " AND r.user_id = ?"
        params += (user_id,)
    return [
        _role_shape(row) for row in tx.execute(sql + " ORDER BY r.granted_at, r.user_id, r.role LIMIT 1000", params)
    ]


class ChannelRoles:
    def __init__(self, database: Database, publisher: EventPublisher, clock: Clock) -> None:
        self._db = database
        self._publisher = publisher
        self._clock = clock

    async def list(self, channel_id: str) -> list[dict[str, Any]]:
        now = to_ms(self._clock.now())
        return await self._db.read(lambda tx: _roles(tx, channel_id, now))

    async def grant(
        self,
        channel_id: str,
        role: str,
        *,
        member_id: str | None = None,
        username: str | None = None,
        expires_at: int | None = None,
    ) -> dict[str, Any]:
        def change(tx: Tx, emitter: Emitter) -> dict[str, Any]:
            now = emitter.now_ms
            if expires_at is not None and expires_at <= now:
                raise PastExpiry()
            broadcaster = channel_by_id(tx, channel_id)
            if member_id is not None:
                member = users_repo.get_by_id(tx, member_id)
                if member is None:
                    raise UnknownMember(member_id)
            else:
                assert username is not None
                try:
                    member = channel_by_username(tx, username)
                except ChannelNotFound:
                    raise UnknownMember(username) from None
            if member.id == channel_id:
                raise BroadcasterRole()
            chat_repo.grant_role(tx, channel_id, member.id, role, now, expires_at)
            if role == "moderator":
                emitter.emit(
                    channel_id,
                    "channel.moderator.add",
                    catalogue.channel_moderator_add(
                        user=catalogue.Person.of(member),
                        moderator=catalogue.Person.of(broadcaster),
                        added_at=iso8601(now),
                    ),
                )
            return next(r for r in _roles(tx, channel_id, now, member.id) if r["roleType"] == role)

        return await self._publisher.write(change)

    async def revoke(self, channel_id: str, member_id: str, role: str) -> None:
        def change(tx: Tx, emitter: Emitter) -> None:
            broadcaster = channel_by_id(tx, channel_id)
            if not chat_repo.revoke_role(tx, channel_id, member_id, role):
                raise RoleNotFound()
            member = users_repo.get_by_id(tx, member_id)
            if role == "moderator" and member is not None:
                emitter.emit(
                    channel_id,
                    "channel.moderator.remove",
                    catalogue.channel_moderator_remove(
                        user=catalogue.Person.of(member),
                        moderator=catalogue.Person.of(broadcaster),
                        removed_at=iso8601(emitter.now_ms),
                    ),
                )

        await self._publisher.write(change)
