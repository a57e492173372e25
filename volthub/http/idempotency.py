"""`@idempotent`: the `Idempotency-Key` header of money-moving POSTs.

Put it right under the route decorator, so it sees the whole answer of the view (its
validation and domain errors included):

    @blueprint.post("/send")
    @idempotent
    @access.token("payments:write")
    ...

Without the header the view just runs. With it, the key is scoped to the caller and the
route; a 2xx or 4xx answer is stored with the key and replayed byte for byte; a 5xx gives
the key up so a retry can run. The same key with another body is 422
`idempotency_key_reused`.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
import trio
from quart import Response, current_app, request

from volthub.http import access
from volthub.http.errors import ApiError
from volthub.http.runtime import runtime
from volthub.services.idempotency import Claim, Replay

F = TypeVar("F", bound=Callable[..., Any])
HEADER = "Idempotency-Key"
ATTRIBUTE = "__volthub_idempotent__"
MAX_KEY_LENGTH = 255


def idempotent(fn: F) -> F:
    @functools.wraps(fn)
    async def view(*args: Any, **kwargs: Any) -> Any:
        key = request.headers.get(HEADER)
        if key is None:
            return await fn(*args, **kwargs)
        key = _checked(key)
        service = runtime().services.idempotency
        route = f"{request.method} {request.url_rule.rule if request.url_rule else request.path}"
        outcome = await service.begin(access.principal().user_id, route, key, await _request_hash())
        if isinstance(outcome, Replay):
            return _replayed(outcome)
        return await _run_once(service, outcome, fn, args, kwargs)

    setattr(view, ATTRIBUTE, True)
    return view  # type: ignore[return-value]


async def _run_once(service: Any, claim: Claim, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    try:
        try:
            response = await current_app.make_response(await fn(*args, **kwargs))
        except Exception as error:  # a domain or validation error is an answer too
            response = await current_app.make_response(await current_app.handle_user_exception(error))
    except BaseException:
        await service.abandon(claim)
        raise
    if response.status_code >= 500:
        await service.abandon(claim)
        return response
    body = await response.get_data(as_text=True)  # type: ignore[misc]
    with trio.CancelScope(shield=True):
        await service.finish(claim, response.status_code, response.content_type or "application/json", body)
    return response


def _replayed(replay: Replay) -> Response:
    response = Response(replay.body, status=replay.status, content_type=replay.content_type)
    response.headers["Idempotent-Replayed"] = "true"
    return response


def _checked(key: str) -> str:
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise ApiError(
            400,
            "invalid_idempotency_key",
            f"{HEADER} must be 1 to {MAX_KEY_LENGTH} printable ASCII characters",
            {"header": HEADER},
        )
    return key


async def _request_hash() -> str:
    """The body as JSON with sorted keys (spacing and key order do not make a new request)."""
    data = await request.get_data(as_text=False)
    raw = data if isinstance(data, bytes) else data.encode()
    try:
        canonical: bytes = orjson.dumps(orjson.loads(raw), option=orjson.OPT_SORT_KEYS) if raw else b""
    except orjson.JSONDecodeError:
        canonical = raw
    return hashlib.sha256(request.path.encode() + b"\n" + canonical).hexdigest()
