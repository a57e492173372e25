"""Client identification at the token endpoint (RFC 6749 §2.3.1), sans-IO.

One parser of `Authorization: Basic` (used by the token and revocation endpoints and by the
token endpoint's rate-limit key) and one check of a client id before it is looked up.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from urllib.parse import unquote_plus

__all__ = ["MAX_CLIENT_ID_LENGTH", "BasicCredentials", "MalformedBasic", "parse_basic", "plausible_client_id"]

# Our client ids are UUIDs; anything far longer is not one of ours and is never looked up.
MAX_CLIENT_ID_LENGTH = 256


def plausible_client_id(value: str) -> bool:
    """Worth looking up: printable ASCII of sane length (PostgreSQL refuses NUL in text).

    Everything that takes a client id from a request asks this first; an implausible one is
    treated as unknown (404, or `invalid_client` at the OAuth endpoints)."""
    return 0 < len(value) <= MAX_CLIENT_ID_LENGTH and value.isascii() and value.isprintable()


@dataclass(frozen=True)
class BasicCredentials:
    """`client_secret_basic`: both parts form-decoded; either may be empty."""

    client_id: str
    secret: str


class MalformedBasic(ValueError):
    """The header says Basic but is not base64 of UTF-8 `id:secret`."""


def parse_basic(authorization: str | None) -> BasicCredentials | None:
    """The credentials of an `Authorization: Basic …` header; None for any other scheme or
    no header. RFC 6749 §2.3.1: the id and secret are form-encoded, then joined with `:`
    and base64-encoded, so `%3A` in the id is a colon and `+` a space."""
    if not authorization:
        return None
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # bad base64, or not UTF-8
        raise MalformedBasic("malformed Basic credentials") from None
    raw_id, colon, raw_secret = decoded.partition(":")
    if not colon:
        raise MalformedBasic("malformed Basic credentials")
    return BasicCredentials(unquote_plus(raw_id), unquote_plus(raw_secret))
