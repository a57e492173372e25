"""Badges and teams: plain rows."""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import IntegrityError, Tx
from volthub.persistence.pagination import decode_cursor, encode_cursor
from volthub.persistence.records import Record

# --- badges ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Badge(Record):
    slug: str
    category: str
    title: str
    description: str


@dataclass(frozen=True)
class UserBadge:
    badge: Badge
    channel_id: str | None
    awarded_at: int


def badges(tx: Tx, category: str | None) -> list[Badge]:
    if category is None:
        rows = tx.execute("SELECT slug, category, title, description FROM badges ORDER BY category, slug")
    else:
        rows = tx.execute(
            "SELECT slug, category, title, description FROM badges WHERE category = ? ORDER BY slug", (category,)
        )
    return [Badge.from_row(row) for row in rows]


def badges_by_slug(tx: Tx, slugs: list[str]) -> dict[str, Badge]:
    if not slugs:
        return {}
    marks = ", ".join("?" for _ in slugs)
    rows = tx.execute(f"SELECT slug, category, title, description FROM badges WHERE slug IN ({marks})", slugs)
    return {row["slug"]: Badge.from_row(row) for row in rows}


def user_badges(tx: Tx, user_id: str, channel_id: str | None) -> list[UserBadge]:
    """The user's global badges, plus those awarded in `channel_id` when given."""
    scopes = ["", channel_id] if channel_id else [""]
    marks = ", ".join("?" for _ in scopes)
    rows = tx.execute(
        "SELECT b.slug, b.category, b.title, b.description, ub.channel_id, ub.awarded_at FROM user_badges ub"
        f" JOIN badges b ON b.slug = ub.slug WHERE ub.user_id = ? AND ub.scope_key IN ({marks})"
        " ORDER BY ub.awarded_at, b.slug",
        (user_id, *scopes),
    )
    return [UserBadge(Badge.from_row(row), row["channel_id"], int(row["awarded_at"])) for row in rows]


def subscriber_tenure_by_tier(tx: Tx, channel_id: str) -> dict[str, int]:
    """The longest tenure (months) any subscription of the channel reached, per tier; tiers
    nobody ever subscribed at are absent."""
    rows = tx.execute(
        "SELECT tier, MAX(months) AS months FROM subscriptions WHERE channel_id = ? GROUP BY tier", (channel_id,)
    )
    return {row["tier"]: int(row["months"]) for row in rows}


def role_holders(tx: Tx, channel_id: str, now_ms: int) -> dict[str, int]:
    """How many members hold each chat role (moderator, vip) in the channel now."""
    rows = tx.execute(
        "SELECT role, COUNT(*) AS holders FROM channel_roles WHERE channel_id = ?"
        " AND (expires_at IS NULL OR expires_at > ?) GROUP BY role",
        (channel_id, now_ms),
    )
    return {row["role"]: int(row["holders"]) for row in rows}


def award(tx: Tx, user_id: str, slug: str, channel_id: str | None, now_ms: int) -> bool:
    try:
        with tx.savepoint():
            tx.execute(
                "INSERT INTO user_badges (user_id, slug, channel_id, scope_key, awarded_at) VALUES (?, ?, ?, ?, ?)",
                (user_id, slug, channel_id, channel_id or "", now_ms),
            )
    except IntegrityError:
        return False
    return True


def withdraw(tx: Tx, user_id: str, slug: str, channel_id: str | None) -> bool:
    rows = tx.execute(
        "DELETE FROM user_badges WHERE user_id = ? AND slug = ? AND scope_key = ? RETURNING user_id",
        (user_id, slug, channel_id or ""),
    )
    return bool(rows)


# --- teams -----------------------------------------------------------------------------------


class TeamExists(Exception):
    pass


@dataclass(frozen=True)
class Team(Record):
    id: str
    slug: str
    name: str
    description: str
    member_count: int
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class TeamMember(Record):
    user_id: str
    username: str
    display_name: str
    avatar_url: str | None
    role: str
    joined_at: int


_TEAM = (
    "t.id, t.slug, t.name, t.description, t.created_at, t.updated_at,"
    " (SELECT COUNT(*) FROM team_members m WHERE m.team_id = t.id) AS member_count"
)


def create_team(tx: Tx, team_id: str, slug: str, name: str, description: str, now_ms: int) -> Team:
    try:
        with tx.savepoint():
            tx.execute(
                "INSERT INTO teams (id, slug, name, description, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (team_id, slug, name, description, now_ms, now_ms),
            )
    except IntegrityError:
        raise TeamExists(slug) from None
    return Team(team_id, slug, name, description, 0, now_ms, now_ms)


def delete_team(tx: Tx, slug: str) -> bool:
    return bool(tx.execute("DELETE FROM teams WHERE slug = ? RETURNING id", (slug,)))


def team(tx: Tx, slug: str) -> Team | None:
    return Team.fetch_one(tx, f"SELECT {_TEAM} FROM teams t WHERE t.slug = ?", (slug,))


def teams(tx: Tx, limit: int, cursor: str | None) -> tuple[list[Team], str | None]:
    """By slug; cursor = the last slug seen."""
    params: list[object] = []
    after = ""
    if cursor:
        (last,) = decode_cursor(cursor, 1)
        after = " WHERE t.slug > ?"
        params.append(last)
    rows = tx.execute(f"SELECT {_TEAM} FROM teams t{after} ORDER BY t.slug LIMIT ?", (*params, limit + 1))
    found = [Team.from_row(row) for row in rows[:limit]]
    return found, encode_cursor(found[-1].slug) if len(rows) > limit else None


def add_member(tx: Tx, team_id: str, user_id: str, role: str, now_ms: int) -> bool:
    try:
        with tx.savepoint():
            tx.execute(
                "INSERT INTO team_members (team_id, user_id, role, joined_at) VALUES (?, ?, ?, ?)",
                (team_id, user_id, role, now_ms),
            )
    except IntegrityError:
        tx.execute("UPDATE team_members SET role = ? WHERE team_id = ? AND user_id = ?", (role, team_id, user_id))
        return False
    return True


def remove_member(tx: Tx, team_id: str, user_id: str) -> bool:
    rows = tx.execute(
        "DELETE FROM team_members WHERE team_id = ? AND user_id = ? RETURNING user_id", (team_id, user_id)
    )
    return bool(rows)


def members(tx: Tx, team_id: str, limit: int, cursor: str | None) -> tuple[list[TeamMember], str | None]:
    """Owners first, then by join time; cursor = (rank, joined_at, user id) of the last one."""
    params: list[object] = [team_id]
    after = ""
    if cursor:
        rank, joined, user_id = decode_cursor(cursor, 3)
        after = " AND (m.rnk > ? OR (m.rnk = ? AND (m.joined_at > ? OR (m.joined_at = ? AND m.user_id > ?))))"
        params += [rank, rank, joined, joined, user_id]
    rows = tx.execute(
        "SELECT * FROM (SELECT m.user_id, m.role, m.joined_at, u.username, u.display_name, u.avatar_url,"
        " CASE WHEN m.role = 'owner' THEN 0 ELSE 1 END AS rnk FROM team_members m JOIN users u ON u.id = m.user_id"
        f" WHERE m.team_id = ?) m WHERE 1 = 1{after} ORDER BY m.rnk, m.joined_at, m.user_id LIMIT ?",
        (*params, limit + 1),
    )
    found = [TeamMember.from_row(row) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = encode_cursor(int(last["rnk"]), int(last["joined_at"]), last["user_id"])
    return found, next_cursor
