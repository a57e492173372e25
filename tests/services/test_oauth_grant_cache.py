"""The grant cache behind OAuth access tokens leaves every process on a revocation event."""

from __future__ import annotations

from typing import Any

import pytest

from tests.services.cache_support import CountingDatabase, FakeClock, Publisher
from volthub.hub.publisher import Event
from volthub.persistence.oauth import Grant
from volthub.services import oauth as oauth_module
from volthub.services.oauth import OAuthPolicy, OAuthService

GRANT = Grant("g1", "u1", "c1", "chat:read", frozenset({"chat:read"}), 1, 1, None, None)


def event(name: str, *, is_test: bool = False) -> Event:
    return Event("e1", name, "owner", {}, "2026-11-23T00:00:00Z", is_test=is_test)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    def get_grant(tx: Any, grant_id: str) -> Grant:
        seen.append(grant_id)
        return GRANT

    monkeypatch.setattr(oauth_module.repo, "get_grant", get_grant)
    return seen


def service(publisher: Publisher) -> OAuthService:
    built = OAuthService(
        CountingDatabase(),  # type: ignore[arg-type]
        publisher,  # type: ignore[arg-type]
        FakeClock(),
        None,  # type: ignore[arg-type]
        OAuthPolicy(access_ttl=3600, refresh_ttl=86400, code_ttl=60, need_review=False, cache_seconds=60),
    )
    publisher.bus.subscribe(built.on_event)  # as build_oauth_service wires it
    return built


async def test_a_revocation_event_empties_the_cache(lookups: list[str]) -> None:
    publisher = Publisher()
    oauth = service(publisher)
    assert await oauth.held_scopes("g1", "u1", "c1") == {"chat:read"}
    assert await oauth.held_scopes("g1", "u1", "c1") == {"chat:read"}
    assert lookups == ["g1"], "the second lookup came from the cache"
    publisher.bus.publish(event("user.authorization.revoke"))  # e.g. relayed from another process
    await oauth.held_scopes("g1", "u1", "c1")
    assert lookups == ["g1", "g1"]


async def test_other_events_and_test_events_leave_it(lookups: list[str]) -> None:
    publisher = Publisher()
    oauth = service(publisher)
    await oauth.held_scopes("g1", "u1", "c1")
    publisher.bus.publish(event("user.authorization.revoke", is_test=True))
    publisher.bus.publish(event("user.authorization.grant"))
    publisher.bus.publish(event("chat.message"))
    await oauth.held_scopes("g1", "u1", "c1")
    assert lookups == ["g1"]


def test_build_oauth_service_subscribes_to_the_bus() -> None:
    from volthub.config import OAuthSettings

    publisher = Publisher()
    built = oauth_module.build_oauth_service(CountingDatabase(), publisher, FakeClock(), OAuthSettings())  # type: ignore[arg-type]
    assert built.on_event in publisher.bus._listeners
