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
from volthub.services.sessions import SIGN_IN
from volthub.services.tokens import SESSION, Claims, TokenError
from volthub.services.users import User


def csrf_token(seed: str, purpose: str) -> str:
    key = runtime().services.oauth_csrf_key.encode("utf-8")
    return hmac.new(key, f"{purpose}|{seed}".encode(), hashlib.sha256).hexdigest()


def csrf_ok(seed: str | None, purpose: str, sent: str | None) -> bool:
    if not seed or not sent:
        return False
    return hmac.compare_digest(csrf_token(seed, purpose).encode("ascii"), sent.encode("utf-8", "surrogatepass"))


async def sign_in(user_id: str) -> tuple[str, int]:
    """A session token for a page's sign-in form (stored, listed and revocable like the
    API's sign-in), and its expiry in epoch seconds."""
    issued = await runtime().services.sessions.issue(user_id, SIGN_IN)
    return issued.token, issued.expires_at


async def session_claims(raw: str | None) -> Claims | None:
    """The claims of a first-party session token (a cookie's value) whose session still
    stands, or None."""
    if not raw:
        return None
    rt = runtime()
    try:
        claims = rt.tokens.verify(raw)
    except TokenError:
        return None
    if claims.kind != SESSION or not await rt.services.sessions.active(claims):
        return None
    return claims


async def session_user(raw: str | None) -> User | None:
    """The user of a first-party session token (a cookie's value), or None."""
    claims = await session_claims(raw)
    return None if claims is None else await runtime().services.users.by_id(claims.user_id)


def set_cookie(
    response: Response, name: str, value: str, max_age: int | None, path: str, samesite: str = "Lax"
) -> None:
    secure = request.scheme == "https" or runtime().settings.server.public_url.startswith("https://")
    response.set_cookie(name, value, max_age=max_age, path=path, secure=secure, httponly=True, samesite=samesite)
