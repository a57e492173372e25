"""Developer apps (OAuth clients). Secrets are stored hashed (SHA-256 of a random secret)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from volthub.persistence.database import Tx
from volthub.persistence.records import Record


@dataclass(frozen=True)
class App(Record):
    client_id: str
    owner_id: str
    name: str
    description: str
    logo_url: str | None
    redirect_uris: list[str]
    client_secret_hash: str | None
    bot_app: bool
    reviewed: bool
    created_at: int
    updated_at: int

    @property
    def is_public(self) -> bool:
        """A public client has no secret (a browser or native app) and must use PKCE."""
        return self.client_secret_hash is None


def get_app(tx: Tx, client_id: str) -> App | None:
    return App.fetch_one(tx, f"SELECT {App.columns()} FROM apps WHERE client_id = ?", (client_id,))


def apps_of_owner(tx: Tx, owner_id: str) -> list[App]:
    return App.fetch_all(
        tx, f"SELECT {App.columns()} FROM apps WHERE owner_id = ? ORDER BY created_at, client_id", (owner_id,)
    )


# --- writes (the developer-apps routes and `volthub apps`) ------------------------------------


def create_app(
    tx: Tx,
    *,
    client_id: str,
    owner_id: str,
    name: str,
    description: str,
    logo_url: str | None,
    redirect_uris: list[str],
    client_secret_hash: str | None,
    bot_app: bool,
    now_ms: int,
) -> App:
    """`client_secret_hash` None makes a public client (it must use PKCE)."""
    tx.execute(
        f"INSERT INTO apps ({App.columns()}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, FALSE, ?, ?)",
        (
            client_id,
            owner_id,
            name,
            description,
            logo_url,
            orjson.dumps(redirect_uris).decode(),
            client_secret_hash,
            bot_app,
            now_ms,
            now_ms,
        ),
    )
    return App(
        client_id,
        owner_id,
        name,
        description,
        logo_url,
        list(redirect_uris),
        client_secret_hash,
        bot_app,
        False,
        now_ms,
        now_ms,
    )


# API field -> column, for the PATCH route; redirect URIs are stored as a JSON list.
_EDITABLE = {
    "name": "name",
    "description": "description",
    "logo_url": "logo_url",
    "redirect_uris": "redirect_uris",
    "bot_app": "bot_app",
}


def update_app(tx: Tx, client_id: str, changes: dict[str, object], now_ms: int) -> App | None:
    """Apply `changes` (keys of `_EDITABLE`); unknown keys are a programming error."""
    values = [orjson.dumps(v).decode() if key == "redirect_uris" else v for key, v in changes.items()]
    sets = [f"{_EDITABLE[key]} = ?" for key in changes]
    tx.execute(
        f"UPDATE apps SET {', '.join([*sets, 'updated_at = ?'])} WHERE client_id = ?",
        (*values, now_ms, client_id),
    )
    return get_app(tx, client_id)


def set_secret_hash(tx: Tx, client_id: str, secret_hash: str, now_ms: int) -> None:
    tx.execute(
        "UPDATE apps SET client_secret_hash = ?, updated_at = ? WHERE client_id = ?",
        (secret_hash, now_ms, client_id),
    )


def set_reviewed(tx: Tx, client_id: str, reviewed: bool, now_ms: int) -> bool:
    rows = tx.execute(
        "UPDATE apps SET reviewed = ?, updated_at = ? WHERE client_id = ? RETURNING client_id",
        (reviewed, now_ms, client_id),
    )
    return bool(rows)


def delete_app(tx: Tx, client_id: str) -> bool:
    """Grants, codes, refresh tokens, scope grants and webhooks go with it (ON DELETE CASCADE)."""
    return bool(tx.execute("DELETE FROM apps WHERE client_id = ? RETURNING client_id", (client_id,)))


def list_apps(tx: Tx, limit: int = 1000) -> list[App]:
    return App.fetch_all(tx, f"SELECT {App.columns()} FROM apps ORDER BY created_at, client_id LIMIT ?", (limit,))
