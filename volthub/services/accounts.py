"""Accounts and follows: the state changes behind the account and user routes."""

from __future__ import annotations

import uuid
from typing import Any

from volthub.hub.clock import iso8601
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, Tx
from volthub.persistence import users as repo
from volthub.persistence.users import User, UsernameTaken
from volthub.protocol import catalogue, names
from volthub.protocol.catalogue import Person
from volthub.services.channel_points import pay_follow_bonus
from volthub.services.notifications import notify
from volthub.services.passwords import Passwords

__all__ = ["Accounts", "DisplayNameRefused", "User", "UsernameTaken", "SelfFollow", "UnknownUser"]


class SelfFollow(Exception):
    pass


class DisplayNameRefused(Exception):
    """A display name that looks like a reserved name or another account's username; the
    message says which (it completes "displayName ...")."""


def check_display_name(tx: Tx, display_name: str, username: str, user_id: str) -> None:
    """Refuse a display name that could pass for someone else (DisplayNameRefused). One's
    own username in another case or spacing is always allowed."""
    if names.is_spelling_of(display_name, username):
        return
    key = names.skeleton(display_name)
    if key in names.reserved_skeletons():
        raise DisplayNameRefused("looks like a reserved name")
    if repo.username_skeleton_taken(tx, key, user_id):
        raise DisplayNameRefused("looks like another account's username")


class UnknownUser(Exception):
    pass


class Accounts:
    def __init__(
        self, database: Database, publisher: EventPublisher, passwords: Passwords, *, follow_bonus: int = 0
    ) -> None:
        self._db = database
        self._publisher = publisher
        self._passwords = passwords
        # Channel points a viewer gets the first time they ever follow a channel ([channel_points]).
        self._follow_bonus = follow_bonus
        # Build the look-alike table now (~0.2 s), not inside the first write transaction.
        names.reserved_skeletons()

    async def register(self, username: str, password: str, display_name: str | None) -> User:
        password_hash = await self._passwords.hash(password)

        def change(tx: Tx, emitter: Emitter) -> User:
            user_id = str(uuid.uuid4())
            if display_name is not None:
                check_display_name(tx, display_name, username, user_id)
            return repo.create_user(
                tx,
                user_id=user_id,
                username=username,
                display_name=display_name or username,
                password_hash=password_hash,
                now_ms=emitter.now_ms,
            )

        return await self._publisher.write(change)

    async def login(self, username: str, password: str) -> User | None:
        found = await self._db.read(lambda tx: repo.password_hash_for_login(tx, username))
        user, stored = found if found else (None, None)
        return user if await self._passwords.verify(stored, password) else None

    async def get_user(self, user_id: str) -> User | None:
        """The user with this id, or None (one read transaction)."""
        return await self._db.read(lambda tx: repo.get_by_id(tx, user_id))

    async def update_profile(self, user_id: str, changes: dict[str, Any]) -> User:
        def change(tx: Tx, emitter: Emitter) -> User:
            if changes.get("displayName") is not None:
                current = repo.get_by_id(tx, user_id)
                if current is None:
                    raise UnknownUser(user_id)
                check_display_name(tx, changes["displayName"], current.username, user_id)
            user = repo.update_profile(tx, user_id, changes, emitter.now_ms)
            if user is None:
                raise UnknownUser(user_id)
            return user

        return await self._publisher.write(change)

    async def follow(self, follower_id: str, target_id: str) -> int:
        """Returns followedAt (ms). Following twice is idempotent and emits nothing."""
        if follower_id == target_id:
            raise SelfFollow()

        def change(tx: Tx, emitter: Emitter) -> int:
            follower, target = _both(tx, follower_id, target_id)
            created, followed_at = repo.follow(tx, follower_id, target_id, emitter.now_ms)
            if created:
                at = iso8601(followed_at)
                who, whom = Person.of(follower), Person.of(target)
                emitter.emit(target_id, "channel.follow", catalogue.channel_follow(follower=who, followed_at=at))
                emitter.emit(
                    follower_id, "user.follow", catalogue.user_follow(follower=who, followed=whom, followed_at=at)
                )
                notify(
                    tx,
                    target_id,
                    "follow.new",
                    "New follower",
                    f"{follower.display_name} followed you",
                    {**who.fields(), "followedAt": at},
                    followed_at,
                )
                pay_follow_bonus(tx, target_id, follower_id, self._follow_bonus, followed_at)
            return followed_at

        return await self._publisher.write(change)

    async def unfollow(self, follower_id: str, target_id: str) -> bool:
        def change(tx: Tx, emitter: Emitter) -> bool:
            follower, target = _both(tx, follower_id, target_id)
            removed = repo.unfollow(tx, follower_id, target_id)
            if removed:
                at = iso8601(emitter.now_ms)
                data = catalogue.user_unfollow(
                    follower=Person.of(follower), followed=Person.of(target), unfollowed_at=at
                )
                emitter.emit(follower_id, "user.unfollow", data)
            return removed

        return await self._publisher.write(change)


def _both(tx: Tx, follower_id: str, target_id: str) -> tuple[User, User]:
    follower = repo.get_by_id(tx, follower_id)
    target = repo.get_by_id(tx, target_id)
    if follower is None or target is None:
        raise UnknownUser(target_id if target is None else follower_id)
    return follower, target
