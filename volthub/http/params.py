"""Path parameters: one check for ids, so every route refuses a bad one the same way."""

from __future__ import annotations

import uuid

from volthub.http.errors import ApiError


def uuid_param(value: str, name: str) -> str:
    """A canonical lower-case UUID string, or a 400 naming the parameter."""
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        raise ApiError(400, "invalid_id", f"{name} must be a UUID", {"field": name}) from None
    if str(parsed) != value.lower():  # refuse braces, urn: prefixes, missing hyphens
        raise ApiError(400, "invalid_id", f"{name} must be a UUID", {"field": name})
    return str(parsed)
