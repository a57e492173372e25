"""Channel roles over OAuth.

Grant VIP or moderator by `memberId` or `username` with an optional `expiresAt`; list;
delete. Writes count against the roles budget (30/min) and go through the channel's actor
(services/channel_roles.py); the `role-expiry` service ends grants at their `expiresAt`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, model_validator
from quart import Blueprint
from quart_schema import tag, validate_request, validate_response

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.errors import ApiError
from volthub.http.params import uuid_param
from volthub.http.ratelimit import limited
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.hub.components import roles
from volthub.services.channel_roles import ChannelRoles

blueprint = Blueprint("channel_roles", __name__, url_prefix="/api/integrations/oauth/channel-roles")


class RoleOut(Model):
    memberId: str
    username: str
    displayName: str
    roleType: str
    grantedAt: str
    expiresAt: str | None


_ROLE_EXAMPLE = {
    "memberId": "0b7e2a4c-5d1f-4e8a-9c3b-9033dbea0000",
    "username": "ada_streams",
    "displayName": "Ada Streams",
    "roleType": "moderator",
    "grantedAt": "2026-03-14T18:30:00Z",
    "expiresAt": "2026-03-14T18:30:00Z",
}


class OneRoleOut(Model):
    example = {"role": _ROLE_EXAMPLE}

    role: RoleOut


class RolesOut(Model):
    example = {"roles": [_ROLE_EXAMPLE]}

    roles: list[RoleOut]


class GrantBody(Body):
    example = {
        "roleType": "vip",
        "memberId": "0b7e2a4c-5d1f-4e8a-9c3b-9033dbea0000",
        "username": "ada_streams",
        "expiresAt": "2026-03-14T18:30:00Z",
    }

    roleType: Literal["vip", "moderator"]
    memberId: str | None = Field(None, max_length=64)
    username: str | None = Field(None, min_length=1, max_length=50)
    expiresAt: str | None = Field(
        None, max_length=40, description=f"ISO 8601, in the future, at most {roles.EXPIRY_MAX_DAYS} days ahead"
    )

    @model_validator(mode="after")
    def _one_member(self) -> GrantBody:
        if (self.memberId is None) == (self.username is None):
            raise ValueError("give exactly one of memberId or username")
        return self


def _service() -> ChannelRoles:
    return runtime().services.channel_roles


def _epoch_ms(value: str) -> int:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, "validation_error", "expiresAt must be an ISO 8601 time", {"field": "expiresAt"}) from None
    if moment.tzinfo is None:
        raise ApiError(400, "validation_error", "expiresAt needs a time zone (e.g. Z)", {"field": "expiresAt"})
    return int(moment.timestamp() * 1000)


@blueprint.get("")
@access.token("channel:read")
@tag(["Channel roles"])
@validate_response(RolesOut)
async def list_roles() -> RolesOut:
    """The current VIPs and moderators of your channel."""
    roles = await _service().list(access.principal().user_id)
    return RolesOut(roles=[RoleOut(**role) for role in roles])


@blueprint.post("")
@access.token("channel:roles:write")
@limited("roles_write")
@tag(["Channel roles"])
@error_responses(404)
@validate_request(GrantBody)
@validate_response(OneRoleOut, 201)
async def grant_role(data: GrantBody) -> tuple[OneRoleOut, int]:
    """Grant VIP or moderator in your channel (the broadcaster's own role is not grantable:
    400 `invalid_member`; 404 when no user has that memberId or username); a moderator grant
    emits `channel.moderator.add`. The member's open Socket.IO connections get
    `channel:badges` at once; a grant with `expiresAt` ends then (a moderator's end emits
    `channel.moderator.remove`)."""
    member_id = None if data.memberId is None else uuid_param(data.memberId, "memberId")
    expires_at = None if data.expiresAt is None else _epoch_ms(data.expiresAt)
    role = await _service().grant(
        access.principal().user_id, data.roleType, member_id=member_id, username=data.username, expires_at=expires_at
    )
    return OneRoleOut(role=RoleOut(**role)), 201


@blueprint.delete("/<member_id>/<role_type>")
@access.token("channel:roles:write")
@limited("roles_write")
@tag(["Channel roles"])
@error_responses(404)
async def delete_role(member_id: str, role_type: str) -> tuple[str, int]:
    """Remove a role (204; 404 when the member does not hold it); a moderator removal emits
    `channel.moderator.remove`, and the member's open Socket.IO connections get `channel:badges`."""
    member_id = uuid_param(member_id, "memberId")
    if role_type not in ("vip", "moderator"):
        raise ApiError(400, "validation_error", "roleType must be vip or moderator", {"field": "roleType"})
    await _service().revoke(access.principal().user_id, member_id, role_type)
    return "", 204
