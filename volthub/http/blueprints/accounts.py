"""First-party accounts: the platform's own login, needed to consent and own apps."""

from __future__ import annotations

import re

from pydantic import Field, field_validator
from quart import Blueprint
from quart_schema import document_response, tag, validate_request, validate_response

from volthub.http import access
from volthub.http.errors import ApiError
from volthub.http.login_guard import LoginThrottled, Throttled, guarded_login
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, DisplayName, ErrorBody, Model, UserOut
from volthub.http.users_view import user_out
from volthub.hub.clock import iso8601
from volthub.services.accounts import Accounts, UsernameTaken

blueprint = Blueprint("accounts", __name__, url_prefix="/api/auth")

USERNAME = re.compile(r"^[A-Za-z0-9_]{3,25}$")
# Names that would collide with fixed path segments under /api/users/ or mislead people.
RESERVED = frozenset({"me", "search", "follow", "admin", "api", "system", "volthub", "root"})


class RegisterBody(Body):
    username: str = Field(min_length=3, max_length=25, pattern=r"^[A-Za-z0-9_]+$")
    password: str = Field(min_length=8, max_length=128)
    displayName: DisplayName | None = None

    @field_validator("username")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value.lower() in RESERVED:
            raise ValueError("this username is reserved")
        return value


class LoginBody(Body):
    username: str = Field(min_length=1, max_length=25)
    password: str = Field(min_length=1, max_length=128)


class SessionOut(Model):
    user: UserOut
    token: str
    tokenType: str = "Bearer"
    expiresAt: str


def accounts() -> Accounts:
    return runtime().services.accounts


def _session(user) -> SessionOut:  # type: ignore[no-untyped-def]
    token, expires_at = runtime().tokens.issue_session(user.id)  # type: ignore[union-attr]
    return SessionOut(user=user_out(user), token=token, expiresAt=iso8601(expires_at * 1000))


@blueprint.post("/register")
@access.public
@tag(["Accounts"])
@validate_request(RegisterBody)
@validate_response(SessionOut, 201)
@document_response(ErrorBody, 409)
async def register(data: RegisterBody) -> tuple[SessionOut, int]:
    """Create a first-party account and sign in.

    Usernames are 3–25 letters, digits or underscores, unique case-insensitively and
    returned as typed. Passwords are 8–128 characters.
    """
    try:
        user = await accounts().register(data.username, data.password, data.displayName)
    except UsernameTaken:
        raise ApiError(409, "username_taken", "that username is taken", {"field": "username"}) from None
    return _session(user), 201


@blueprint.post("/login")
@access.public
@tag(["Accounts"])
@validate_request(LoginBody)
@validate_response(SessionOut, 200)
@document_response(ErrorBody, 401)
async def login(data: LoginBody) -> SessionOut:
    """Sign in with username (any case) and password; returns a first-party token.

    Failed attempts are throttled per account and per client address (`[auth]
    failed_logins_per_*`): past the budget, 429 with Retry-After. While every password-hash
    slot and its queue are busy: 503 `busy` with Retry-After."""
    try:
        user = await guarded_login(data.username, data.password)
    except LoginThrottled as refused:
        raise _throttled(refused.throttled) from None
    if user is None:
        raise ApiError(401, "invalid_credentials", "username or password is wrong")
    return _session(user)


def _throttled(refused: Throttled) -> ApiError:
    if refused.which == "address" and refused.retry_after == 1:
        message = "too many sign-ins in progress from this address; retry in 1 s"
    else:
        message = f"too many failed logins for this {refused.which}; retry in {refused.retry_after} s"
    return ApiError(
        429,
        "rate_limit_exceeded",
        message,
        headers={"Retry-After": str(refused.retry_after)},
        extra={"retry_after": refused.retry_after},
    )
