"""How a user is shown on the wire."""

from __future__ import annotations

from volthub.http.schemas import UserOut
from volthub.services.users import User


def user_out(user: User) -> UserOut:
    return UserOut.from_record(user)
