"""How a user is shown on the wire."""

from __future__ import annotations

from volthub.http.schemas import UserOut
from volthub.hub.clock import iso8601
from volthub.services.users import User


def user_out(user: User) -> UserOut:
    return UserOut(
        id=user.id,
        username=user.username,
        displayName=user.display_name,
        avatarUrl=user.avatar_url,
        bio=user.bio,
        createdAt=iso8601(user.created_at),
    )
