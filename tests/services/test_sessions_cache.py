"""The session check behind first-party tokens is cached, and leaves every process's cache
on a revocation relayed through the bus."""

from __future__ import annotations

from typing import Any

import pytest

from tests.services.cache_support import NOW, CountingDatabase, FakeClock, Publisher
from volthub.hub.publisher import Event
from volthub.persistence.sessions import Session
from volthub.services import sessions as sessions_module
from volthub.services.sessions import SESSION_REVOKED, Sessions, build_sessions
from volthub.services.tokens import SESSION, Claims

CLAIMS = Claims(SESSION, "u1", int(NOW) + 3600, "jti", session_id="s1")


def event(name: str, session_id: str) -> Event:
    return Event("e1", name, "u1", {"userId": "u1", "sessionId": session_id}, "2026-11-23T00:00:00Z")


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    def get(tx: Any, session_id: str) -> Session:
        seen.append(session_id)
        return Session(session_id, "u1", "sign-in", 1, int(NOW * 1000) + 3_600_000, None)

    monkeypatch.setattr(sessions_module.repo, "get", get)
    return seen


def service(publisher: Publisher) -> Sessions:
    return build_sessions(CountingDatabase(), publisher, FakeClock(), None, cache_seconds=60)  # type: ignore[arg-type]


async def test_a_cached_check_costs_no_lookup_until_a_revocation_event(lookups: list[str]) -> None:
    publisher = Publisher()
    sessions = service(publisher)
    assert await sessions.active(CLAIMS) and await sessions.active(CLAIMS)
    assert lookups == ["s1"], "the second check came from the cache"
    publisher.bus.publish(event("internal.other", "s1"))
    publisher.bus.publish(event(SESSION_REVOKED, "s2"))
    assert await sessions.active(CLAIMS)
    assert lookups == ["s1"], "other events and other sessions leave the entry"
    publisher.bus.publish(event(SESSION_REVOKED, "s1"))  # e.g. relayed from another process
    await sessions.active(CLAIMS)
    assert lookups == ["s1", "s1"]


async def test_a_token_without_a_session_needs_no_lookup(lookups: list[str]) -> None:
    sessions = service(Publisher())
    assert await sessions.active(Claims(SESSION, "u1", int(NOW) + 3600, "jti"))
    assert lookups == []


async def test_a_session_of_another_user_does_not_stand(lookups: list[str]) -> None:
    sessions = service(Publisher())
    assert not await sessions.active(Claims(SESSION, "u2", int(NOW) + 3600, "jti", session_id="s1"))
