"""First-party accounts: the platform's own login, needed to consent and own apps.

Every session token (sign-in, registration) has a stored session the user can list and
revoke (`/api/auth/sessions`, `/api/auth/logout`); a revoked session's token is refused at
once in every process. Tokens issued before sessions were stored stay valid until they
expire.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator
from quart import Blueprint, Response, jsonify
from quart_schema import document_response, tag, validate_request, validate_response

from volthub.http import access
from volthub.http.errors import ApiError, not_found
from volthub.http.login_guard import LoginThrottled, Throttled, guarded_login
from volthub.http.openapi import responds
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, DisplayName, ErrorBody, Model, UserOut, example_of
from volthub.http.users_view import user_out
from volthub.hub.clock import iso8601
from volthub.protocol.names import RESERVED_USERNAMES
from volthub.services.accounts import Accounts, UsernameTaken
from volthub.services.sessions import SIGN_IN, Session, Sessions

blueprint = Blueprint("accounts", __name__, url_prefix="/api/auth")

USERNAME = re.compile(r"^[A-Za-z0-9_]{3,25}$")
RESERVED = RESERVED_USERNAMES


class RegisterBody(Body):
    example = {"username": "ada_streams", "password": "correct horse battery", "displayName": "Ada Streams"}

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
    example = {"username": "ada_streams", "password": "correct horse battery"}

    username: str = Field(min_length=1, max_length=25)
    password: str = Field(min_length=1, max_length=128)


class SessionOut(Model):
    example = {
        "user": example_of(UserOut),
        "token": "vh_at_3q2Xb9Lk0sZpA1mN7rTq",
        "tokenType": "Bearer",
        "expiresAt": "2026-03-14T18:30:00Z",
    }

    user: UserOut
    token: str
    tokenType: str = "Bearer"
    expiresAt: str


class StoredSessionOut(Model):
    id: str
    label: str = Field(description='how it was made: "sign-in" or "volthub token"')
    createdAt: str
    expiresAt: str
    current: bool = Field(description="the session of the token making this request")


class StoredSessionList(Model):
    example = {
        "items": [
            {
                "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
                "label": "sign-in",
                "createdAt": "2026-03-14T18:30:00Z",
                "expiresAt": "2026-03-14T18:30:00Z",
                "current": False,
            }
        ]
    }

    items: list[StoredSessionOut]


def accounts() -> Accounts:
    return runtime().services.accounts


def sessions() -> Sessions:
    return runtime().services.sessions


async def _session(user) -> SessionOut:  # type: ignore[no-untyped-def]
    issued = await sessions().issue(user.id, SIGN_IN)
    return SessionOut(user=user_out(user), token=issued.token, expiresAt=iso8601(issued.expires_at * 1000))


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
    return await _session(user), 201


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
    return await _session(user)


@blueprint.get("/sessions")
@access.first_party
@tag(["Accounts"])
@document_response(StoredSessionList)
async def list_sessions() -> Any:
    """The signed-in user's sessions neither revoked nor expired, newest first; `current`
    marks the one of the token making this request."""
    caller = access.principal()
    found = await sessions().of_user(caller.user_id)
    items = [_stored_session_out(session, caller.session_id) for session in found]
    return jsonify(StoredSessionList(items=items).model_dump())


def _stored_session_out(session: Session, current: str | None) -> StoredSessionOut:
    return StoredSessionOut.from_record(session, current=session.id == current)


@blueprint.delete("/sessions/<session_id>")
@access.first_party
@tag(["Accounts"])
@document_response(ErrorBody, 404)
async def revoke_session(session_id: str) -> Any:
    """Revoke one of the signed-in user's sessions: its token is refused at once, in every
    process, and its Events API connections end. 404 for an unknown, expired, already
    revoked or another user's session."""
    if not await sessions().revoke(access.principal().user_id, session_id):
        raise not_found("session", sessionId=session_id)
    return Response("", status=204)


@blueprint.post("/logout")
@access.first_party
@tag(["Accounts"])
@responds(204, "Signed out: the session is revoked")
@document_response(ErrorBody, 409)
async def logout() -> Any:
    """Revoke the session of the token making this request. 409 `not_revocable` for a
    token issued before sessions were stored (it stays valid until it expires)."""
    caller = access.principal()
    if caller.session_id is None:
        raise ApiError(409, "not_revocable", "this token predates revocable sessions; it stays valid until it expires")
    await sessions().revoke(caller.user_id, caller.session_id)
    return Response("", status=204)


def _throttled(refused: Throttled) -> ApiError:
    if refused.which == "address" and refused.retry_after == 1:
        message = "too many sign-ins in progress from this address; retry in 1 s"
    else:
        message = f"too many failed logins for this {refused.which}; retry in {refused.retry_after} s"
    return ApiError(
        429,
        "rate_limit_exceeded",
        message,
        details={"retry_after": refused.retry_after},
        headers={"Retry-After": str(refused.retry_after)},
        extra={"retry_after": refused.retry_after},
    )
