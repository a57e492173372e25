"""The one app-ownership check, and the developer-apps service, on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import stored_user as _user
from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import SystemClock
from volthub.hub.publisher import EventPublisher
from volthub.services.apps import AppFields, AppNotFound, Apps, PublicClient, owned_app
from volthub.services.oauth import build_oauth_service, secret_matches


def _apps(db: Any) -> Apps:
    from volthub.config import load_settings

    clock = SystemClock()
    oauth = build_oauth_service(
        db, EventPublisher(db, InProcessBroker(), clock), clock, load_settings(None, environ={}).oauth
    )
    return Apps(db, clock, oauth)


def _fields(public: bool = False) -> AppFields:
    return AppFields("bot", "", None, ["https://app.example/cb"], False, public)


async def test_only_the_owner_sees_an_app_and_odd_ids_are_unknown(db: Any) -> None:
    apps = _apps(db)
    owner, stranger = await _user(db), await _user(db)
    app, secret = await apps.create(owner, _fields())
    assert secret is not None and secret_matches(app, secret)
    assert (await apps.owned(owner, app.client_id)).client_id == app.client_id
    for who, client_id in [(stranger, app.client_id), (owner, "missing"), (owner, "a\x00b"), (owner, "x" * 300)]:
        with pytest.raises(AppNotFound) as caught:
            await db.read(lambda tx, who=who, client_id=client_id: owned_app(tx, who, client_id))
        assert caught.value.client_id == client_id
    assert await apps.find("a\x00b") is None  # never reaches PostgreSQL, which refuses NUL


async def test_rotate_replaces_the_secret_and_public_clients_have_none(db: Any) -> None:
    apps = _apps(db)
    owner = await _user(db)
    app, first = await apps.create(owner, _fields())
    rotated, second = await apps.rotate_secret(owner, app.client_id)
    assert first is not None and not secret_matches(rotated, first) and secret_matches(rotated, second)
    public, none = await apps.create(owner, _fields(public=True))
    assert none is None and public.is_public
    with pytest.raises(PublicClient):
        await apps.rotate_secret(owner, public.client_id)
    updated = await apps.update(owner, app.client_id, {"name": "renamed", "redirect_uris": []})
    assert (updated.name, updated.redirect_uris) == ("renamed", [])
    await apps.delete(owner, app.client_id)
    with pytest.raises(AppNotFound):
        await apps.owned(owner, app.client_id)
