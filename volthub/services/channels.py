"""A channel is its owner's user account: finding one for routes that name a channel.

Shared by the chat reads and channel points, so every "unknown channel" is the same
domain error (`ChannelNotFound`, mapped to 404 `not_found` in `http/errors.py`).
"""

from __future__ import annotations

from volthub.persistence import Tx
from volthub.persistence import users as users_repo
from volthub.persistence.users import User

__all__ = ["ChannelNotFound", "User", "channel_by_id", "channel_by_username"]


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
