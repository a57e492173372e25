"""What the interactive-control routes share: the three blueprints (OAuth, dashboard, by
channel username), the scopes, the decorators each kind of route wears, and the way to the
channel's actor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quart import Blueprint
from quart_schema import tag, validate_request, validate_response

from volthub.http import access
from volthub.http.blueprints.chat import chat_hub
from volthub.http.errors import ApiError
from volthub.http.ratelimit import limited
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


Decorator = Callable[[Any], Any]

# The tag of every by-username route, whatever it controls.
STREAMS_TAG = "Polls and giveaways"


def stacked(*decorators: Decorator) -> Decorator:
    """The decorators applied as if written one above the other, the first on top."""

    def apply(fn: Any) -> Any:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


def refuses(*statuses: int) -> Decorator:
    """Documents the error body of each status, in this order."""
    return stacked(*(validate_response(ErrorBody, status) for status in statuses))


conflicts = refuses(404, 409)


def _reading(body: type | None) -> tuple[Decorator, ...]:
    return () if body is None else (validate_request(body),)


@dataclass(frozen=True)
class Door:
    """One mount of the owner's operations on their own channel: its blueprint, the access
    its reads and its writes declare, and the tag its routes are listed under."""

    blueprint: Blueprint
    read_access: Decorator
    write_access: Decorator
    label: str

    def read(self, rule: str, response: type) -> Decorator:
        return stacked(self.blueprint.get(rule), self.read_access, tag([self.label]), validate_response(response, 200))

    def write(
        self, rule: str, response: type, *, status: int = 200, body: type | None = None, refusals: Decorator = conflicts
    ) -> Decorator:
        return stacked(
            self.blueprint.post(rule),
            self.write_access,
            limited("interactive"),
            tag([self.label]),
            *_reading(body),
            validate_response(response, status),
            refusals,
        )


def channel_read(rule: str, response: type) -> Decorator:
    """A public read of the channel the path names."""
    return stacked(
        streams_blueprint.get(rule), access.public, tag([STREAMS_TAG]), validate_response(response, 200), refuses(404)
    )


def channel_write(rule: str, response: type, *, status: int = 200, body: type | None = None) -> Decorator:
    """The owner's write on the channel the path names (their own, else 403)."""
    return stacked(
        streams_blueprint.post(rule),
        access.token(WRITE_SCOPE),
        limited("interactive"),
        tag([STREAMS_TAG]),
        *_reading(body),
        validate_response(response, status),
        refuses(409),
    )


def viewer_action(rule: str, response: type, *, body: type | None = None) -> Decorator:
    """What a signed-in viewer does in the channel the path names: vote, join, bet."""
    return stacked(
        streams_blueprint.post(rule),
        access.token("user:write"),
        tag([STREAMS_TAG]),
        *_reading(body),
        validate_response(response, 200),
        refuses(404, 409),
    )


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
