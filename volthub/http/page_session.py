"""What the server-rendered pages share: the first-party session cookie's user, CSRF tokens
bound to a purpose and a per-browser seed cookie, and cookie settings.

A CSRF token is HMAC(server key, purpose | seed): the seed lives in a cookie of the page's
origin, the token in the page's forms, so another site can neither read nor forge it.
"""

from __future__ import annotations

import hashlib
import hmac

from quart import Response, request

from volthub.http.runtime import runtime
from volthub.services.tokens import SESSION, TokenError
from volthub.services.users import User


def csrf_token(seed: str, purpose: str) -> str:
    key = runtime().services.oauth_csrf_key.encode("utf-8")
    return hmac.new(key, f"{purpose}|{seed}".encode(), hashlib.sha256).hexdigest()


def csrf_ok(seed: str | None, purpose: str, sent: str | None) -> bool:
    if not seed or not sent:
        return False
    return hmac.compare_digest(csrf_token(seed, purpose).encode("ascii"), sent.encode("utf-8", "surrogatepass"))


async def session_user(raw: str | None) -> User | None:
    """The user of a first-party session token (a cookie's value), or None."""
    tokens = runtime().tokens
    if not raw or tokens is None:
        return None
    try:
        claims = tokens.verify(raw)
    except TokenError:
        return None
    if claims.kind != SESSION:
        return None
    return await runtime().services.users.by_id(claims.user_id)


def set_cookie(
    response: Response, name: str, value: str, max_age: int | None, path: str, samesite: str = "Lax"
) -> None:
    secure = request.scheme == "https" or runtime().settings.server.public_url.startswith("https://")
    response.set_cookie(name, value, max_age=max_age, path=path, secure=secure, httponly=True, samesite=samesite)
