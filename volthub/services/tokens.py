"""JWTs signed with the server secret: first-party sessions and OAuth access tokens.

Expiry is checked against our clock, not PyJWT's, so tests can move time with MockClock.
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


class TokenService:
    def __init__(self, secret: str, clock: Clock, session_ttl: int) -> None:
        self._secret = secret
        self._clock = clock
        self._session_ttl = session_ttl

    def issue_session(self, user_id: str) -> tuple[str, int]:
        return self._issue({"typ": SESSION, "sub": user_id}, self._session_ttl)

    def issue_access(self, user_id: str, client_id: str, scope: str, grant_id: str, ttl: int) -> tuple[str, int]:
        claims = {"typ": ACCESS, "sub": user_id, "cid": client_id, "scope": scope, "gid": grant_id}
        return self._issue(claims, ttl)

    def _issue(self, claims: dict[str, str], ttl: int) -> tuple[str, int]:
        now = int(self._clock.now())
        expires_at = now + ttl
        payload = {**claims, "iss": ISSUER, "iat": now, "exp": expires_at, "jti": uuid.uuid4().hex}
        return jwt.encode(payload, self._secret, algorithm="HS256"), expires_at

    def verify(self, token: str) -> Claims:
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
        claims = _claims(payload)
        if claims.expires_at <= self._clock.now():
            raise TokenError("expired")
        return claims


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
    )
    if kind == ACCESS and (claims.client_id is None or claims.grant_id is None):
        raise TokenError("invalid")
    return claims


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None
