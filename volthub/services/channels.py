"""A channel is its owner's user account: finding one for routes that name a channel.

Shared by the chat reads and channel points, so every "unknown channel" is the same
domain error (`ChannelNotFound`, mapped to 404 `not_found` in `http/errors.py`). Also the
one shape of a channel's leaderboard entries (`ranked`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from volthub.persistence import Row, Tx
from volthub.persistence import users as users_repo
from volthub.persistence.users import User

__all__ = ["ChannelNotFound", "User", "channel_by_id", "channel_by_username", "ranked"]


class ChannelNotFound(LookupError):
    """No user has this id (or username); `str(error)` is the value the caller gave."""


def channel_by_id(tx: Tx, channel_id: str) -> User:
    user = users_repo.get_by_id(tx, channel_id)
    if user is None:
        raise ChannelNotFound(channel_id)
    return user


def channel_by_username(tx: Tx, username: str) -> User:
    """Any case: channel URLs carry the username as typed."""
    user = users_repo.get_by_username_insensitive(tx, username)
    if user is None:
        raise ChannelNotFound(username)
    return user


def ranked(rows: Iterable[Row], score: str) -> list[dict[str, Any]]:
    """Leaderboard entries from rows ordered best first: each row's user (`user_id`,
    `username`, `display_name`) with its rank from 1 and its `score` column, a whole number."""
    return [
        {
            "rank": rank,
            "userId": row["user_id"],
            "username": row["username"],
            "displayName": row["display_name"],
            score: int(row[score]),
        }
        for rank, row in enumerate(rows, start=1)
    ]
