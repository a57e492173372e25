"""The rules every request body and URL meets, whichever listener serves the route (the
app's hooks on the main port, the chat-send fast path on the gateway): one definition,
raising the same `ApiError`s."""

from __future__ import annotations

from typing import Any

import orjson

from volthub.http.errors import ApiError


def nul_refused() -> ApiError:
    """PostgreSQL text cannot hold NUL; refuse it everywhere so both backends agree."""
    return ApiError(400, "invalid_request", "text must not contain NUL (U+0000) characters")


def refuse_nul_in_url(path: str, query_string: bytes) -> None:
    if "\x00" in path or b"%00" in query_string.lower():
        raise nul_refused()


def check_body_size(length: int | None, limit: int) -> None:
    """413 past the route's body limit (`[server] small_body_bytes` or `max_body_bytes`)."""
    if length is not None and length > limit:
        raise ApiError(
            413, "payload_too_large", f"this route takes a request body of at most {limit} bytes", {"maxBytes": limit}
        )


def mimetype_of(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_body_type(method: str, content_type: str | None, has_body: bool, accepted: tuple[str, ...]) -> None:
    """Bodies are JSON unless a route opts into forms (the token endpoint, consent page)."""
    if method not in ("POST", "PUT", "PATCH") or not (content_type or has_body):
        return
    mimetype = mimetype_of(content_type)
    if mimetype in accepted or (mimetype.endswith("+json") and "application/json" in accepted):
        return
    raise ApiError(
        415,
        "unsupported_media_type",
        f"request body must be {' or '.join(accepted)}",
        {"contentType": content_type},
    )


def is_json(content_type: str | None) -> bool:
    mimetype = mimetype_of(content_type)
    return mimetype == "application/json" or (mimetype.startswith("application/") and mimetype.endswith("+json"))


def parse_json(raw: bytes) -> Any:
    """Parse with orjson: invalid UTF-8 or JSON is a 400, never a 500; NUL is refused."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "invalid_json", "request body is not valid JSON") from None
    # Only an escaped \u0000 can put NUL in a JSON string; walk the document only then.
    if b"\\u0000" in raw and _holds_nul(document):
        raise nul_refused()
    return document


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False
