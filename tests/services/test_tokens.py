"""The verified-token cache: signatures are checked once, expiry on every use, bounds hold."""

from __future__ import annotations

import jwt
import pytest

from volthub.services import tokens as tokens_module
from volthub.services.tokens import TokenError, TokenService, VerifiedCache

SECRET = "s" * 32


class FakeClock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.value = now

    def now(self) -> float:
        return self.value


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every token PyJWT really decodes (a cache hit does not)."""
    seen: list[str] = []
    real = jwt.decode

    def counting(token: str, *args: object, **kwargs: object) -> object:
        seen.append(token)
        return real(token, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tokens_module.jwt, "decode", counting)
    return seen


def test_a_token_is_decoded_once_then_served_from_the_cache(decodes: list[str]) -> None:
    service = TokenService(SECRET, FakeClock(), 3600)
    token, _ = service.issue_session("user-1")
    first, second = service.verify(token), service.verify(token)
    assert first == second and first.user_id == "user-1"
    assert decodes == [token]


def test_expiry_is_checked_on_every_use_even_when_cached(decodes: list[str]) -> None:
    clock = FakeClock()
    service = TokenService(SECRET, clock, 30)
    token, expires_at = service.issue_session("user-1")
    service.verify(token)
    clock.value = expires_at  # still inside the cache's own 60 s bound
    with pytest.raises(TokenError) as refused:
        service.verify(token)
    assert refused.value.reason == "expired"
    assert decodes == [token], "refused from the cached claims, without decoding again"


def test_entries_live_at_most_the_cache_bound(decodes: list[str]) -> None:
    clock = FakeClock()
    service = TokenService(SECRET, clock, 3600, VerifiedCache(seconds=10))
    token, _ = service.issue_session("user-1")
    service.verify(token)
    clock.value += 9.9
    service.verify(token)
    assert decodes == [token]
    clock.value += 0.2
    service.verify(token)
    assert decodes == [token, token], "decoded again once the entry is older than the bound"


def test_the_cache_holds_at_most_its_size_oldest_out_first(decodes: list[str]) -> None:
    cache = VerifiedCache(size=2)
    service = TokenService(SECRET, FakeClock(), 3600, cache)
    a, b, c = (service.issue_session(f"user-{n}")[0] for n in range(3))
    for token in (a, b, c):
        service.verify(token)
    assert len(cache) == 2
    service.verify(c)
    service.verify(a)
    assert decodes == [a, b, c, a], "c was still cached, a had been evicted"


def test_tokens_that_fail_verification_are_never_cached(decodes: list[str]) -> None:
    cache = VerifiedCache()
    service = TokenService(SECRET, FakeClock(), 3600, cache)
    token, _ = service.issue_session("user-1")
    forged = TokenService("x" * 32, FakeClock(), 3600).issue_session("user-1")[0]
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    for bad in (forged, tampered, "not a jwt"):
        for _ in range(2):
            with pytest.raises(TokenError) as refused:
                service.verify(bad)
            assert refused.value.reason == "invalid"
    assert len(cache) == 0
    assert decodes.count(forged) == 2, "a refused token is checked again each time"


def test_an_expired_token_is_not_cached(decodes: list[str]) -> None:
    clock = FakeClock()
    service = TokenService(SECRET, clock, 30, VerifiedCache())
    token, expires_at = service.issue_session("user-1")
    clock.value = expires_at + 1
    for _ in range(2):
        with pytest.raises(TokenError):
            service.verify(token)
    assert decodes == [token, token]


def test_a_zero_size_cache_caches_nothing(decodes: list[str]) -> None:
    service = TokenService(SECRET, FakeClock(), 3600, VerifiedCache(size=0))
    token, _ = service.issue_session("user-1")
    service.verify(token)
    service.verify(token)
    assert decodes == [token, token]
