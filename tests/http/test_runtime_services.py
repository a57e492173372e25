"""The composition root: a complete runtime with typed services, and the supervisor that
runs its background services."""

from __future__ import annotations

from typing import Any

from tests.conftest import make_settings
from volthub.http.runtime import Runtime, Services
from volthub.hub.registry import ActorRegistry
from volthub.hub.supervisor import Service
from volthub.services.accounts import Accounts
from volthub.services.apps import Apps
from volthub.services.oauth import OAuthService
from volthub.services.webhooks import Dispatcher, WebhookAdmin


async def test_the_runtime_is_complete_once_the_app_has_started(sqlite_url: str) -> None:
    from volthub.http.app import create_app

    application = create_app(make_settings(sqlite_url))
    assert "volthub" not in application.extensions  # composed at start-up, not before
    async with application.test_app():
        rt: Runtime = application.extensions["volthub"]
        services = rt.services
        assert isinstance(services, Services)
        assert isinstance(services.accounts, Accounts) and isinstance(services.apps, Apps)
        assert isinstance(services.oauth, OAuthService) and services.oauth_csrf_key
        assert isinstance(services.webhooks, Dispatcher) and isinstance(services.webhook_admin, WebhookAdmin)
        assert isinstance(services.chat, ActorRegistry)  # made with the others, not on first use
        assert rt.ready.is_set()
        # One process: presence is the fan-out's own count (the broker's choice).
        assert services.presence.snapshot == services.fanout.snapshot
        supervisor = rt.supervisor
        assert set(supervisor.restarts) == {
            "webhooks",
            "chat",
            "engineio",
            "ingest-silence",
            "relay",
            "presence",
            "recovery",
            "interactive",
            "subscription-expiry",
            "role-expiry",
            "points-earning",
            "metrics",
            "rate-limit-pruning",
        }
    assert all(count == 0 for count in supervisor.restarts.values())
    assert supervisor._stopped.is_set()  # after_serving stopped every background service


async def test_a_crashing_background_service_is_restarted_not_fatal(
    sqlite_url: str, monkeypatch: Any, mock_clock: Any
) -> None:
    import trio

    from volthub.http import composition
    from volthub.http.app import create_app
    from volthub.hub.clock import TrioClock

    runs = 0

    async def crashing() -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError("boom")

    listed = composition.background_services
    monkeypatch.setattr(composition, "background_services", lambda rt: [*listed(rt), Service("crashing", crashing)])
    application = create_app(make_settings(sqlite_url), clock=TrioClock())
    async with application.test_app():
        # Virtual time (jumping only once start-up's database threads are done): the
        # back-off waits 1 + 2 + 4 s, then 8 s, while the app keeps serving.
        mock_clock.autojump_threshold = 0
        await trio.sleep(10)
        mock_clock.autojump_threshold = float("inf")
        client = application.test_client()
        assert (await client.get("/healthz")).status_code == 200
        supervisor = application.extensions["volthub"].supervisor
        assert runs == 4 and supervisor.restarts["crashing"] == 3


async def test_compose_stops_the_background_services_before_it_closes_the_database(
    sqlite_url: str, monkeypatch: Any
) -> None:
    import trio

    from volthub.http import composition
    from volthub.hub.clock import SystemClock

    order: list[str] = []

    async def last_words() -> None:
        try:
            await trio.sleep_forever()
        finally:
            order.append("service stopped")

    listed = composition.background_services
    monkeypatch.setattr(composition, "background_services", lambda rt: [*listed(rt), Service("last-words", last_words)])
    async with composition.compose(make_settings(sqlite_url), SystemClock()) as rt:
        assert rt.ready.is_set()
        close = rt.db.close

        async def recorded_close() -> None:
            order.append("database closed")
            await close()

        monkeypatch.setattr(rt.db, "close", recorded_close)
    assert order == ["service stopped", "database closed"]
