"""What every OAuth route shares: the blueprint, request parameter parsing, the services.

All OAuth routes live on the one blueprint named `oauth`, so their endpoint names (and the
OpenAPI operation ids made from them) are the same whichever module declares them.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request

from volthub.http.runtime import runtime
from volthub.services.apps import Apps
from volthub.services.oauth import OAuthError, OAuthService

blueprint = Blueprint("oauth", __name__)

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
# No OAuth parameter we use is anywhere near this; longer ones are refused, not echoed.
MAX_PARAM_LENGTH = 4096


def oauth_service() -> OAuthService:
    return runtime().services.oauth


def apps() -> Apps:
    return runtime().services.apps


def single_values(values: Any) -> dict[str, str]:
    """A query or form MultiDict as plain strings. RFC 6749 §3.1: no parameter twice;
    a parameter sent without a value is treated as omitted."""
    found: dict[str, str] = {}
    for key in values:
        items = values.getlist(key)
        if len(items) > 1:
            raise OAuthError("invalid_request", f"{key[:64]} was sent more than once")
        if items[0] != "":
            found[key] = items[0]
    return found


def json_values(data: Any, *, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON object's string members (and the `keep` ones whatever their type)."""
    if not isinstance(data, dict):
        raise OAuthError("invalid_request", "the request body must be a JSON object")
    found: dict[str, Any] = {}
    for key, value in data.items():
        if key in keep:
            found[key] = value
        elif value is None or value == "":
            continue
        elif not isinstance(value, str):
            raise OAuthError("invalid_request", f"{key[:64]} must be a string")
        else:
            found[key] = value
    return found


async def request_params() -> dict[str, str]:
    """Token and revocation parameters: form-encoded (RFC 6749) or JSON."""
    if request.is_json:
        return json_values(await request.get_json())
    return single_values(await request.form)
