"""The chat component's store port over an open transaction, and chat reads for services.

`TxChatStore` is what `ChatComponent` reads and writes through inside the channel actor's
transaction (the component itself stays sans-IO); `read_settings` and `read_members` turn
the store's plain rows into the component's records for code outside the actor.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from volthub.hub.components import chat
from volthub.hub.components.chat import MessageRef
from volthub.hub.components.chat_rules import ChatSettings, Member, Standing, person
from volthub.persistence import Tx
from volthub.persistence import chat as repo
from volthub.persistence import emotes as emotes_repo
from volthub.persistence import users as users_repo
from volthub.protocol.images import media_path


def read_settings(tx: Tx, channel_id: str) -> ChatSettings:
    """The stored chat modes; a channel that never chatted has the defaults."""
    return ChatSettings.from_row(repo.get_settings(tx, channel_id))


def read_members(tx: Tx, channel_id: str, user_ids: Iterable[str], now_ms: int) -> dict[str, Member]:
    """Each known user's standing in the channel and avatar, in one query."""
    return {user_id: Member.from_row(row) for user_id, row in repo.standings(tx, channel_id, user_ids, now_ms).items()}


class TxChannelStore:
    """What every store port of one channel inside one transaction reads: who a user is
    in the channel, and who a username names."""

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


class TxChatStore(TxChannelStore):
    """Implements `chat.ChatStore` for one channel inside one transaction."""

    # -- reads --

    def settings(self) -> ChatSettings:
        return read_settings(self._tx, self._channel_id)

    def standing_and_people_named(
        self, user_id: str, usernames: list[str]
    ) -> tuple[Standing | None, dict[str, dict[str, str]]]:
        by_id, by_name = repo.standings_and_named(self._tx, self._channel_id, [user_id], usernames, self._now_ms)
        row = by_id.get(user_id)
        people = {name: person(r["user_id"], r["username"], r["display_name"]) for name, r in by_name.items()}
        return (None if row is None else Standing.from_row(row)), people

    def message(self, message_id: str) -> MessageRef | None:
        stored = repo.get_message(self._tx, self._channel_id, message_id)
        if stored is None:
            return None
        username = stored.payload.get("username")
        return MessageRef(stored.id, stored.user_id, username, stored.deleted_at is not None)

    def emotes(self, codes: list[str]) -> dict[str, str]:
        found = emotes_repo.resolve(self._tx, codes, self._channel_id)
        return {code: media_path(found[code].media_id) for code in codes if code in found}

    def last_message_at(self, user_id: str) -> int | None:
        return repo.last_message_at(self._tx, self._channel_id, user_id)

    def ban_is_permanent(self, user_id: str) -> bool | None:
        ban = repo.active_ban(self._tx, self._channel_id, user_id, self._now_ms)
        return None if ban is None else ban.is_permanent

    # -- writes --

    def apply(self, write: Any) -> None:
        tx, channel_id, now_ms = self._tx, self._channel_id, self._now_ms
        match write:
            case chat.InsertMessage():
                seq = repo.insert_message(
                    tx,
                    message_id=write.message_id,
                    channel_id=channel_id,
                    user_id=write.user_id,
                    is_system=write.is_system,
                    payload=write.payload,
                    now_ms=now_ms,
                )
                prune = write.history.prune_after(seq, now_ms) if write.history is not None else None
                if prune is not None:
                    self.apply(prune)
            case chat.PruneHistory():
                repo.prune_messages(tx, channel_id, write.up_to_seq, write.before_ms)
            case chat.SaveSettings():
                repo.save_settings(tx, channel_id, asdict(write.settings), now_ms)
            case chat.SetBan():
                repo.set_ban(
                    tx,
                    channel_id=channel_id,
                    user_id=write.user_id,
                    moderator_id=write.moderator_id,
                    reason=write.reason,
                    now_ms=now_ms,
                    expires_at=write.expires_at,
                )
            case chat.RemoveBan():
                repo.remove_ban(tx, channel_id, write.user_id, now_ms)
            case chat.DeleteMessage():
                repo.delete_message(tx, channel_id, write.message_id, write.moderator_id, now_ms)
            case _:
                raise TypeError(f"chat store cannot apply {type(write).__name__}")
