"""Reading users and follows: profiles, search, follower lists, follow status.

The writes (register, profile, follow, unfollow) are `volthub.services.accounts.Accounts`.
"""

from __future__ import annotations

from volthub.persistence import Database
from volthub.persistence import users as repo
from volthub.persistence.users import Page, User

__all__ = ["FollowPage", "User", "Users"]

# A page of (user, followed at epoch ms), newest first, and the cursor of the next page.
FollowPage = Page


class Users:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def by_id(self, user_id: str) -> User | None:
        return await self._db.read(lambda tx: repo.get_by_id(tx, user_id))

    async def by_username(self, username: str) -> User | None:
        """Exact, case-sensitive username."""
        return await self._db.read(lambda tx: repo.get_by_username(tx, username))

    async def by_username_any_case(self, username: str) -> User | None:
        """The username matched case-insensitively (how Events API clients name a channel)."""
        return await self._db.read(lambda tx: repo.get_by_username_insensitive(tx, username))

    async def search(self, term: str, limit: int) -> list[User]:
        """Usernames that start with or contain `term`, case-insensitively."""
        return await self._db.read(lambda tx: repo.search(tx, term, limit))

    async def followers(self, user_id: str, limit: int, cursor: str | None) -> FollowPage:
        """`InvalidCursor` for a cursor we did not issue."""
        return await self._db.read(lambda tx: repo.followers(tx, user_id, limit, cursor))

    async def following(self, user_id: str, limit: int, cursor: str | None) -> FollowPage:
        return await self._db.read(lambda tx: repo.following(tx, user_id, limit, cursor))

    async def follow_time(self, follower_id: str, followed_id: str) -> int | None:
        """When `follower_id` started following `followed_id` (epoch ms), or None."""
        return await self._db.read(lambda tx: repo.follow_time(tx, follower_id, followed_id))
