"""Users (each user's id is also their channel id) and follows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from volthub.persistence import names
from volthub.persistence.database import IntegrityError, Tx
from volthub.persistence.pagination import encode_cursor, newest_first
from volthub.persistence.records import Record
from volthub.protocol.names import UnsafeName, is_spelling_of, normalised_display_name, reserved_skeletons, skeleton


class UsernameTaken(Exception):
    pass


@dataclass(frozen=True)
class User(Record):
    id: str
    username: str
    display_name: str
    avatar_url: str | None
    bio: str
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None


def create_user(
    tx: Tx,
    *,
    user_id: str,
    username: str,
    display_name: str,
    password_hash: str,
    now_ms: int,
    kind: str = "user",
    holder: str | None = None,
) -> User:
    """`kind`/`holder` name the claim on the username (persistence.names): a bot's account
    claims its name as the bot. A name held by anyone, or in reserve, is `UsernameTaken`."""
    try:
        names.claim(tx, username, kind, holder or user_id, now_ms)
    except names.NameTaken:
        raise UsernameTaken(username) from None
    try:
        with tx.savepoint():
            tx.execute(
                "INSERT INTO users (id, username, username_lower, username_skeleton, display_name, password_hash,"
                " avatar_url, bio, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, NULL, '', ?, ?)",
                (user_id, username, username.lower(), skeleton(username), display_name, password_hash, now_ms, now_ms),
            )
            # Every user is a channel: its row is the lock of the channel's live state.
            tx.execute("INSERT INTO channels (id, created_at) VALUES (?, ?)", (user_id, now_ms))
    except IntegrityError:
        raise UsernameTaken(username) from None
    return User(user_id, username, display_name, None, "", now_ms, now_ms)


def username_skeleton_taken(tx: Tx, key: str, except_user_id: str) -> bool:
    """Whether another account's username has this confusable skeleton (indexed)."""
    return (
        tx.one("SELECT 1 AS hit FROM users WHERE username_skeleton = ? AND id <> ? LIMIT 1", (key, except_user_id))
        is not None
    )


def fill_username_skeletons(tx: Tx) -> list[tuple[str, str, str]]:
    """Store the skeleton of usernames that have none yet (accounts made before it was
    kept). Returns the display names that break today's rules, as (username, display name,
    why), to be reported: they are left as they are."""
    for row in tx.execute("SELECT id, username FROM users WHERE username_skeleton IS NULL"):
        tx.execute("UPDATE users SET username_skeleton = ? WHERE id = ?", (skeleton(row["username"]), row["id"]))
    rows = tx.execute("SELECT id, username, username_skeleton, display_name FROM users")
    holders: dict[str, set[str]] = {}
    for row in rows:
        holders.setdefault(row["username_skeleton"], set()).add(row["id"])
    found = []
    for row in rows:
        why = _display_name_problem(row["display_name"], row["username"], row["id"], holders)
        if why is not None:
            found.append((row["username"], row["display_name"], why))
    return found


def _display_name_problem(display_name: str, username: str, user_id: str, holders: dict[str, set[str]]) -> str | None:
    try:
        normal = normalised_display_name(display_name)
    except UnsafeName as exc:
        return str(exc)
    if normal != display_name:
        return "is not NFKC-normalised"
    if is_spelling_of(display_name, username):
        return None
    key = skeleton(display_name)
    if key in reserved_skeletons():
        return "looks like a reserved name"
    if holders.get(key, set()) - {user_id}:
        return "looks like another account's username"
    return None


def get_by_id(tx: Tx, user_id: str) -> User | None:
    return User.fetch_one(tx, f"SELECT {User.columns()} FROM users WHERE id = ?", (user_id,))


def get_by_username(tx: Tx, username: str) -> User | None:
    """Exact, case-sensitive lookup (usernames are case-sensitive on profiles)."""
    return User.fetch_one(tx, f"SELECT {User.columns()} FROM users WHERE username = ?", (username,))


def get_by_username_insensitive(tx: Tx, username: str) -> User | None:
    return User.fetch_one(tx, f"SELECT {User.columns()} FROM users WHERE username_lower = ?", (username.lower(),))


def get_many_by_username_insensitive(tx: Tx, usernames: list[str]) -> dict[str, User]:
    """Keyed by lower-cased username; used to resolve @mentions in one query."""
    lowered = sorted({name.lower() for name in usernames})
    if not lowered:
        return {}
    marks = ", ".join("?" for _ in lowered)
    rows = tx.execute(f"SELECT {User.columns()} FROM users WHERE username_lower IN ({marks})", lowered)
    return {row["username"].lower(): User.from_row(row) for row in rows}


def password_hash_for_login(tx: Tx, username: str) -> tuple[User, str] | None:
    row = tx.one(
        f"SELECT {User.columns()}, password_hash FROM users WHERE username_lower = ?",
        (username.lower(),),
    )
    return (User.from_row(row), row["password_hash"]) if row else None


def set_password_hash(tx: Tx, user_id: str, password_hash: str) -> None:
    tx.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id))


def update_profile(tx: Tx, user_id: str, changes: dict[str, Any], now_ms: int) -> User | None:
    columns = {"displayName": "display_name", "avatarUrl": "avatar_url", "bio": "bio"}
    sets = [f"{columns[key]} = ?" for key in changes]
    if sets:
        tx.execute(
            f"UPDATE users SET {', '.join(sets)}, updated_at = ? WHERE id = ?",
            (*changes.values(), now_ms, user_id),
        )
    return get_by_id(tx, user_id)


def list_users(tx: Tx, limit: int = 100) -> list[User]:
    return User.fetch_all(tx, f"SELECT {User.columns()} FROM users ORDER BY created_at, id LIMIT ?", (limit,))


def search(tx: Tx, term: str, limit: int) -> list[User]:
    """Prefix matches first, then substring matches; case-insensitive."""
    needle = term.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = tx.execute(
        f"SELECT {User.columns()}, CASE WHEN username_lower LIKE ? ESCAPE '\\' THEN 0 ELSE 1 END AS rank"
        " FROM users WHERE username_lower LIKE ? ESCAPE '\\' OR lower(display_name) LIKE ? ESCAPE '\\'"
        " ORDER BY rank, username_lower LIMIT ?",
        (needle + "%", "%" + needle + "%", "%" + needle + "%", limit),
    )
    return [User.from_row(row) for row in rows]


def follow(tx: Tx, follower_id: str, followed_id: str, now_ms: int) -> tuple[bool, int]:
    """Returns (created, followed_at); following twice keeps the first time."""
    existing = tx.scalar(
        "SELECT followed_at FROM follows WHERE follower_id = ? AND followed_id = ?",
        (follower_id, followed_id),
    )
    if existing is not None:
        return False, int(existing)
    tx.execute(
        "INSERT INTO follows (follower_id, followed_id, followed_at) VALUES (?, ?, ?)",
        (follower_id, followed_id, now_ms),
    )
    return True, now_ms


def unfollow(tx: Tx, follower_id: str, followed_id: str) -> bool:
    rows = tx.execute(
        "DELETE FROM follows WHERE follower_id = ? AND followed_id = ? RETURNING follower_id",
        (follower_id, followed_id),
    )
    return bool(rows)


def follow_time(tx: Tx, follower_id: str, followed_id: str) -> int | None:
    value = tx.scalar(
        "SELECT followed_at FROM follows WHERE follower_id = ? AND followed_id = ?",
        (follower_id, followed_id),
    )
    return None if value is None else int(value)


def _follow_page(tx: Tx, *, mine: str, other: str, user_id: str, limit: int, cursor: str | None) -> Page:
    """Newest first. `mine` is the column holding user_id, `other` the listed users."""
    select = (
        f"SELECT u.id, u.username, u.display_name, u.avatar_url, u.bio, u.created_at, u.updated_at,"
        f" f.followed_at FROM follows f JOIN users u ON u.id = f.{other} WHERE f.{mine} = ?"
    )
    rows, more = newest_first(tx, select, [user_id], limit, cursor or None, at="f.followed_at", key=f"f.{other}")
    items = [(User.from_row(row), int(row["followed_at"])) for row in rows]
    next_cursor = encode_cursor(int(rows[-1]["followed_at"]), rows[-1]["id"]) if more else None
    return Page(items, next_cursor)


def followers(tx: Tx, user_id: str, limit: int, cursor: str | None) -> Page:
    return _follow_page(tx, mine="followed_id", other="follower_id", user_id=user_id, limit=limit, cursor=cursor)


def following(tx: Tx, user_id: str, limit: int, cursor: str | None) -> Page:
    return _follow_page(tx, mine="follower_id", other="followed_id", user_id=user_id, limit=limit, cursor=cursor)


def count_followers(tx: Tx, user_id: str) -> int:
    return int(tx.scalar("SELECT COUNT(*) AS n FROM follows WHERE followed_id = ?", (user_id,)))


def delete_users(tx: Tx, user_ids: Sequence[str]) -> int:
    """Remove accounts and what hangs off them (foreign keys cascade; PostgreSQL's event log is
    keyed by channel without one, so its rows go here too). For `volthub loadtest`, which removes
    the accounts it registered on a database it was given; the API has no account deletion."""
    removed = 0
    for user_id in user_ids:
        if tx.dialect == "postgresql":  # the cluster's shared event log (PostgreSQL only)
            tx.execute("DELETE FROM event_log WHERE channel_id = ?", (user_id,))
            tx.execute("DELETE FROM event_channel_positions WHERE channel_id = ?", (user_id,))
        removed += len(tx.execute("DELETE FROM users WHERE id = ? RETURNING id", (user_id,)))
    return removed
