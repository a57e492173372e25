"""Bots of bot-type apps, the bot each channel selected, and per-channel custom names."""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import Tx
from volthub.persistence.records import Record
from volthub.protocol.names import skeleton

_BOT = (
    "b.client_id, b.user_id, b.command_prefix, b.default_permission, b.created_at, b.updated_at,"
    " u.username, u.display_name, a.name AS app_name, a.owner_id, a.logo_url, a.reviewed"
)
_FROM = " FROM bots b JOIN users u ON u.id = b.user_id JOIN apps a ON a.client_id = b.client_id"


@dataclass(frozen=True)
class Bot(Record):
    client_id: str
    user_id: str  # the bot's own account
    username: str  # the default bot name
    display_name: str
    command_prefix: str
    default_permission: str
    app_name: str
    owner_id: str
    logo_url: str | None
    reviewed: bool
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class CustomName(Record):
    client_id: str
    channel_id: str
    channel_username: str
    name: str
    created_at: int


def get(tx: Tx, client_id: str) -> Bot | None:
    return Bot.fetch_one(tx, f"SELECT {_BOT}{_FROM} WHERE b.client_id = ?", (client_id,))


def all_bots(tx: Tx, limit: int) -> list[Bot]:
    return Bot.fetch_all(tx, f"SELECT {_BOT}{_FROM} ORDER BY u.username_lower LIMIT ?", (limit,))


def insert(tx: Tx, client_id: str, user_id: str, prefix: str, permission: str, now_ms: int) -> None:
    tx.execute(
        "INSERT INTO bots (client_id, user_id, command_prefix, default_permission, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (client_id, user_id, prefix, permission, now_ms, now_ms),
    )


def update_settings(tx: Tx, client_id: str, prefix: str, permission: str, now_ms: int) -> None:
    tx.execute(
        "UPDATE bots SET command_prefix = ?, default_permission = ?, updated_at = ? WHERE client_id = ?",
        (prefix, permission, now_ms, client_id),
    )


def rename_account(tx: Tx, user_id: str, name: str, now_ms: int) -> None:
    tx.execute(
        "UPDATE users SET username = ?, username_lower = ?, username_skeleton = ?, display_name = ?, updated_at = ?"
        " WHERE id = ?",
        (name, name.lower(), skeleton(name), name, now_ms, user_id),
    )


def selected(tx: Tx, channel_id: str) -> str | None:
    value = tx.scalar("SELECT client_id FROM channel_bots WHERE channel_id = ?", (channel_id,))
    return None if value is None else str(value)


def select(tx: Tx, channel_id: str, client_id: str, now_ms: int) -> None:
    tx.execute("DELETE FROM channel_bots WHERE channel_id = ?", (channel_id,))
    tx.execute(
        "INSERT INTO channel_bots (channel_id, client_id, selected_at) VALUES (?, ?, ?)",
        (channel_id, client_id, now_ms),
    )


def unselect(tx: Tx, channel_id: str) -> bool:
    return bool(tx.execute("DELETE FROM channel_bots WHERE channel_id = ? RETURNING channel_id", (channel_id,)))


def custom_name(tx: Tx, client_id: str, channel_id: str) -> str | None:
    value = tx.scalar(
        "SELECT name FROM bot_custom_names WHERE client_id = ? AND channel_id = ?", (client_id, channel_id)
    )
    return None if value is None else str(value)


def set_custom_name(tx: Tx, client_id: str, channel_id: str, name: str, now_ms: int) -> None:
    tx.execute("DELETE FROM bot_custom_names WHERE client_id = ? AND channel_id = ?", (client_id, channel_id))
    tx.execute(
        "INSERT INTO bot_custom_names (client_id, channel_id, name, created_at) VALUES (?, ?, ?, ?)",
        (client_id, channel_id, name, now_ms),
    )


def remove_custom_name(tx: Tx, client_id: str, channel_id: str) -> None:
    tx.execute("DELETE FROM bot_custom_names WHERE client_id = ? AND channel_id = ?", (client_id, channel_id))


def custom_names(tx: Tx, client_id: str) -> list[CustomName]:
    return CustomName.fetch_all(
        tx,
        "SELECT c.client_id, c.channel_id, u.username AS channel_username, c.name, c.created_at"
        " FROM bot_custom_names c JOIN users u ON u.id = c.channel_id WHERE c.client_id = ? ORDER BY c.created_at",
        (client_id,),
    )
