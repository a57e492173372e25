"""Channel roles: VIP and moderator.

Grants and removals go through the channel's actor (hub/components/roles.py): one
transaction with `channel.moderator.add/remove` and the badge push, so the member's chat
flags, badges and moderation rights change at once. A refusal comes back as the actor's
`Refused` (400 `validation_error` / `invalid_member`, 404 `not_found`).

Expiry: `ChannelRoles` is a source of `services.expiry.ExpiryService` (the `role-expiry`
service): at a grant's `expiresAt` it sends `ExpireRoles` to the channel's actor, whose
guarded delete ends the grant once even with several processes, emitting
`channel.moderator.remove` for moderators and the badge push for every role. A restarted
process ends the grants that expired while it was down.
"""

from __future__ import annotations

from typing import Any, Protocol

import trio

from volthub.hub.clock import Clock, iso8601, to_ms
from volthub.hub.components import roles
from volthub.persistence import Database, Tx
from volthub.persistence import chat as chat_repo
from volthub.services.expiry import Wakeup

__all__ = ["ROLE_TYPES", "ChannelRoles", "RoleCommands"]

ROLE_TYPES = roles.ROLE_TYPES
# Channels handed to their actors per look at the due grants.
EXPIRY_BATCH = 100


class RoleCommands(Protocol):
    """The actor registry, as roles use it (hub.registry.ActorRegistry)."""

    async def call(self, channel_id: str, command: Any) -> Any: ...


def _role_shape(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "memberId": row["user_id"],
        "username": row["username"],
        "displayName": row["display_name"],
        "roleType": row["role"],
        "grantedAt": iso8601(int(row["granted_at"])),
        "expiresAt": None if row["expires_at"] is None else iso8601(int(row["expires_at"])),
    }


def _roles(tx: Tx, channel_id: str, now_ms: int) -> list[dict[str, Any]]:
    sql = (
        "SELECT r.user_id, r.role, r.granted_at, r.expires_at, u.username, u.display_name FROM channel_roles r"
        " JOIN users u ON u.id = r.user_id WHERE r.channel_id = ? AND (r.expires_at IS NULL OR r.expires_at > ?)"
        " ORDER BY r.granted_at, r.user_id, r.role LIMIT 1000"
    )
    return [_role_shape(row) for row in tx.execute(sql, (channel_id, now_ms))]


class ChannelRoles:
    """Roles of channel members; grants and removals are commands to the channel's actor (`hub`)."""

    def __init__(self, database: Database, clock: Clock, hub: RoleCommands) -> None:
        self._db = database
        self._clock = clock
        self._hub = hub
        self._wakeup = Wakeup()

    def _now(self) -> int:
        return to_ms(self._clock.now())

    async def list(self, channel_id: str) -> list[dict[str, Any]]:
        now = self._now()
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
        granted: roles.Role = await self._commands().call(
            channel_id, roles.GrantRole(role, member_id, username, expires_at)
        )
        if expires_at is not None:
            self._wakeup.wake()  # it may be the earliest expiry: the service looks again
        return granted.as_api()

    async def revoke(self, channel_id: str, member_id: str, role: str) -> None:
        await self._commands().call(channel_id, roles.RemoveRole(member_id, role))

    def _commands(self) -> RoleCommands:
        return self._hub

    # -- expiry (a source of services.expiry.ExpiryService) --

    @property
    def changed(self) -> trio.Event:
        return self._wakeup.changed

    async def expire_due(self) -> int:
        """Hand every channel with a due grant to its actor; how many grants this process ended."""
        ended = 0
        while True:
            now = self._now()
            channels = await self._db.read(lambda tx: chat_repo.channels_with_due_roles(tx, now, EXPIRY_BATCH))
            for channel_id in channels:
                # An actor's trouble (busy inbox, shutting down) propagates: the service is
                # supervised and restarted with back-off, and the grant stays due meanwhile.
                ended += await self._commands().call(channel_id, roles.ExpireRoles())
            if len(channels) < EXPIRY_BATCH:
                return ended

    async def next_expiry(self) -> int | None:
        return await self._db.read(chat_repo.next_role_expiry)
