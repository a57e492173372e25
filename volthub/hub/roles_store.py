"""The roles component's store port over an open transaction (the component stays sans-IO)."""

from __future__ import annotations

from typing import Any

from volthub.hub.components import roles
from volthub.hub.components.chat_rules import Standing
from volthub.persistence import Tx
from volthub.persistence import chat as repo
from volthub.persistence import users as users_repo


class TxRoleStore:
    """Implements `roles.RoleStore` for one channel inside one transaction."""

    def __init__(self, tx: Tx, channel_id: str, now_ms: int) -> None:
        self._tx = tx
        self._channel_id = channel_id
        self._now_ms = now_ms

    def standing(self, user_id: str) -> Standing | None:
        row = repo.standing(self._tx, self._channel_id, user_id, self._now_ms)
        return None if row is None else Standing.from_row(row)

    def user_id_of(self, username: str) -> str | None:
        user = users_repo.get_by_username_insensitive(self._tx, username)
        return None if user is None else user.id

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
