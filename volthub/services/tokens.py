"""JWTs signed with the server secret: first-party sessions and OAuth access tokens.

Expiry is checked against our clock, not PyJWT's, so tests can move time with MockClock.

Verified signatures are remembered (`VerifiedCache`): checking an HS256 signature and
decoding the claims costs ~0.1 ms, a tenth of a Socket.IO connect, and clients present the
same token again and again (every reconnect, every REST call). Only what depends on the
token's bytes and the secret alone is cached — that a token is well formed and signed by
us, and its claims — so nothing a revocation changes is: an OAuth token's grant is looked
up by the caller after `verify` on every use (`OAuthService.token_scopes`), as is a
session token's stored session (`Sessions.active`, by its `sid` claim), and the
token's own expiry is checked against the clock on every use, cached or not. Entries are
bounded in number and age, and a token that fails verification is never cached.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import jwt

from volthub.hub.clock import Clock

ISSUER = "volthub"
SESSION = "session"
ACCESS = "access"


class TokenError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # "expired" or "invalid"


@dataclass(frozen=True)
class Claims:
    kind: str
    user_id: str
    expires_at: int
    token_id: str
    client_id: str | None = None
    scope: str = ""
    grant_id: str | None = None
    # A session token's stored session (`sid`); None for tokens issued before sessions
    # were stored, which stay valid until they expire.
    session_id: str | None = None


# Verified tokens remembered, and for how long at most (seconds of the service's clock).
VERIFIED_CACHE_SIZE = 10_000
VERIFIED_CACHE_SECONDS = 60.0


class VerifiedCache:
    """Raw token -> its claims, for tokens whose signature checked out; oldest out first."""

    __slots__ = ("_entries", "_size", "_seconds")

    def __init__(self, size: int = VERIFIED_CACHE_SIZE, seconds: float = VERIFIED_CACHE_SECONDS) -> None:
        self._entries: dict[str, tuple[Claims, float]] = {}
        self._size = size
        self._seconds = seconds

    def get(self, token: str, now: float) -> Claims | None:
        hit = self._entries.get(token)
        if hit is None:
            return None
        if hit[1] <= now:
            del self._entries[token]
            return None
        return hit[0]

    def put(self, token: str, claims: Claims, now: float) -> None:
        if self._size <= 0:
            return
        while len(self._entries) >= self._size:
            self._entries.pop(next(iter(self._entries)))  # dicts keep insertion order
        self._entries[token] = (claims, now + self._seconds)

    def __len__(self) -> int:
        return len(self._entries)


class TokenService:
    def __init__(self, secret: str, clock: Clock, session_ttl: int, cache: VerifiedCache | None = None) -> None:
        self._secret = secret
        self._clock = clock
        self._session_ttl = session_ttl
        self._verified = cache if cache is not None else VerifiedCache()

    @property
    def session_ttl(self) -> int:
        return self._session_ttl

    def issue_session(self, user_id: str, session_id: str | None = None) -> tuple[str, int]:
        """A first-party token; with `session_id` (`sid`), revocable through that stored session."""
        claims = {"typ": SESSION, "sub": user_id}
        if session_id is not None:
            claims["sid"] = session_id
        return self._issue(claims, self._session_ttl)

    def issue_access(self, user_id: str, client_id: str, scope: str, grant_id: str, ttl: int) -> tuple[str, int]:
        claims = {"typ": ACCESS, "sub": user_id, "cid": client_id, "scope": scope, "gid": grant_id}
        return self._issue(claims, ttl)

    def _issue(self, claims: dict[str, str], ttl: int) -> tuple[str, int]:
        now = int(self._clock.now())
        expires_at = now + ttl
        payload = {**claims, "iss": ISSUER, "iat": now, "exp": expires_at, "jti": uuid.uuid4().hex}
        return jwt.encode(payload, self._secret, algorithm="HS256"), expires_at

    def verify(self, token: str) -> Claims:
        """The claims of a token we signed that has not expired; TokenError otherwise."""
        now = self._clock.now()
        claims = self._verified.get(token, now)
        if claims is None:
            claims = self._decode(token)
            if claims.expires_at > now:
                self._verified.put(token, claims, now)
        if claims.expires_at <= now:  # every use, cached or not
            raise TokenError("expired")
        return claims

    def _decode(self, token: str) -> Claims:
        try:
            payload = jwt.decode(
                token,
                self._secret,
                algorithms=["HS256"],
                issuer=ISSUER,
                options={"verify_exp": False, "verify_iat": False, "require": ["exp", "sub", "typ"]},
            )
        except jwt.PyJWTError:
            raise TokenError("invalid") from None
        return _claims(payload)


def _claims(payload: dict[str, object]) -> Claims:
    kind, user_id, exp = payload.get("typ"), payload.get("sub"), payload.get("exp")
    if kind not in (SESSION, ACCESS) or not isinstance(user_id, str) or not isinstance(exp, int):
        raise TokenError("invalid")
    claims = Claims(
        kind=kind,
        user_id=user_id,
        expires_at=exp,
        token_id=str(payload.get("jti", "")),
        client_id=_opt_str(payload.get("cid")),
        scope=_opt_str(payload.get("scope")) or "",
        grant_id=_opt_str(payload.get("gid")),
        session_id=_opt_str(payload.get("sid")) if kind == SESSION else None,
    )
    if kind == ACCESS and (claims.client_id is None or claims.grant_id is None):
        raise TokenError("invalid")
    return claims


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None
