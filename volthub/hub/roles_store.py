"""The roles component's store port over an open transaction (the component stays sans-IO)."""

from __future__ import annotations

from typing import Any

from volthub.hub.chat_store import TxChannelStore
from volthub.hub.components import roles
from volthub.persistence import chat as repo


class TxRoleStore(TxChannelStore):
    """Implements `roles.RoleStore` for one channel inside one transaction."""

    def remove(self, member_id: str, role: str) -> bool:
        return repo.revoke_role(self._tx, self._channel_id, member_id, role)

    def expire_due(self, now_ms: int) -> list[roles.EndedRole]:
        rows = repo.expire_roles(self._tx, self._channel_id, now_ms)
        return [roles.EndedRole(row["user_id"], row["role"], int(row["expires_at"])) for row in rows]

    def apply(self, write: Any) -> None:
        match write:
            case roles.SaveRole():
                repo.grant_role(
                    self._tx, self._channel_id, write.member_id, write.role, write.granted_at, write.expires_at
                )
            case _:
                raise TypeError(f"roles store cannot apply {type(write).__name__}")
