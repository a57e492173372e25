"""The app's typed services and the supervisor that runs its background services."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import make_settings
from volthub.http.runtime import Runtime, Services
from volthub.services.accounts import Accounts
from volthub.services.apps import Apps
from volthub.services.oauth import OAuthService
from volthub.services.webhooks import Dispatcher, WebhookAdmin


async def test_services_are_typed_attributes_made_at_start(sqlite_url: str) -> None:
    from volthub.http.app import create_app

    application = create_app(make_settings(sqlite_url))
    rt: Runtime = application.extensions["volthub"]
    assert not rt.started
    with pytest.raises(AssertionError):
        rt.services  # noqa: B018  (made in before_serving, not before)
    async with application.test_app():
        services = rt.services
        assert isinstance(services, Services)
        assert isinstance(services.accounts, Accounts) and isinstance(services.apps, Apps)
        assert isinstance(services.oauth, OAuthService) and services.oauth_csrf_key
        assert isinstance(services.webhooks, Dispatcher) and isinstance(services.webhook_admin, WebhookAdmin)
        # One process: presence is the fan-out's own count (the broker's choice).
        assert services.presence.snapshot == services.fanout.snapshot
        supervisor = rt.supervisor
        assert supervisor is not None
        assert set(supervisor.restarts) == {
            "webhooks",
            "chat",
            "engineio",
            "gateway",
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

    from volthub.http import app as app_module
    from volthub.hub.clock import TrioClock

    runs = 0

    async def crashing(rt: Runtime) -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError("boom")

    monkeypatch.setattr(app_module, "SERVICES", [*app_module.SERVICES, ("crashing", crashing)])
    application = app_module.create_app(make_settings(sqlite_url), clock=TrioClock())
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
