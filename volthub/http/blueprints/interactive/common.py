"""What the interactive-control routes share: the three blueprints (OAuth, dashboard, by
channel username), the scopes, and the way to the channel's actor."""

from __future__ import annotations

from typing import Any

from quart import Blueprint
from quart_schema import validate_response

from volthub.http import access
from volthub.http.blueprints.chat import chat_hub
from volthub.http.errors import ApiError
from volthub.http.runtime import Runtime, runtime
from volthub.http.schemas import ErrorBody
from volthub.hub.clock import to_ms
from volthub.hub.registry import ActorRegistry

READ_SCOPE = "channel:read"
WRITE_SCOPE = "channel:interactive:write"

CONFLICTS = "409: `already_active` (another one is open) or `invalid_state` (details.status is the current one)."

# The owner's operations are mounted twice: for integrations and for the first-party dashboard.
oauth_blueprint = Blueprint("interactive", "volthub.http.blueprints.interactive", url_prefix="/api/integrations/oauth")
dashboard_blueprint = Blueprint(
    "dashboard_interactive", "volthub.http.blueprints.interactive", url_prefix="/api/dashboard"
)
streams_blueprint = Blueprint(
    "stream_interactive", "volthub.http.blueprints.interactive", url_prefix="/api/streams/<username>"
)


def hub() -> ActorRegistry:
    return chat_hub()  # the one registry of the process


def now_ms(rt: Runtime) -> int:
    return to_ms(rt.clock.now())


async def call(channel_id: str, command: Any) -> Any:
    return await hub().call(channel_id, command)


def me() -> str:
    return access.principal().user_id


def conflicts(fn: Any) -> Any:
    return validate_response(ErrorBody, 404)(validate_response(ErrorBody, 409)(fn))


async def channel_of(username: str) -> str:
    user = await runtime().services.users.by_username(username)
    if user is None:
        raise ApiError(404, "not_found", "channel not found", {"username": username})
    return user.id


async def owned_channel(username: str) -> str:
    channel_id = await channel_of(username)
    if channel_id != access.principal().user_id:
        raise ApiError(403, "channel_not_owned", "only the channel's owner may do this", {"username": username})
    return channel_id
