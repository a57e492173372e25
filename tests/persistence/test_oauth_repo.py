"""OAuth repositories on SQLite and PostgreSQL: apps, operator scope grants, user grants,
codes and refresh tokens, and the `grant_has_scope` check webhooks rely on."""

from __future__ import annotations

import uuid

from tests.conftest import create_test_app
from tests.conftest import stored_user as _user
from volthub.persistence import apps as apps_repo
from volthub.persistence import oauth as repo
from volthub.persistence.oauth import AuthorizationCode


async def _app(db, owner: str, secret_hash: str | None = "hash") -> apps_repo.App:
    return await db.write(
        lambda tx: create_test_app(
            tx,
            str(uuid.uuid4()),
            owner,
            "App",
            bot_app=True,
            redirect_uris=["https://a.example/cb"],
            client_secret_hash=secret_hash,
            description="d",
            now_ms=10,
        )
    )


async def _grant(db, user: str, client_id: str, held: set[str], consented: str = "chat:read") -> repo.Grant:
    return await db.write(
        lambda tx: repo.create_grant(
            tx,
            grant_id=str(uuid.uuid4()),
            user_id=user,
            client_id=client_id,
            consented_scope=consented,
            held=held,
            now_ms=20,
        )
    )


async def test_apps_round_trip(db):
    owner = await _user(db)
    created = await _app(db, owner)
    public = await _app(db, owner, secret_hash=None)
    found = await db.read(lambda tx: apps_repo.get_app(tx, created.client_id))
    assert found == created and found.bot_app is True and found.reviewed is False and not found.is_public
    assert (await db.read(lambda tx: apps_repo.get_app(tx, public.client_id))).is_public
    assert {a.client_id for a in await db.read(lambda tx: apps_repo.apps_of_owner(tx, owner))} == {
        created.client_id,
        public.client_id,
    }

    updated = await db.write(
        lambda tx: apps_repo.update_app(
            tx, created.client_id, {"name": "New", "redirect_uris": [], "bot_app": False}, 30
        )
    )
    assert (
        updated.name == "New" and updated.redirect_uris == [] and updated.bot_app is False and updated.updated_at == 30
    )
    assert await db.write(lambda tx: apps_repo.set_reviewed(tx, created.client_id, True, 40))
    assert (await db.read(lambda tx: apps_repo.get_app(tx, created.client_id))).reviewed is True
    assert not await db.write(lambda tx: apps_repo.set_reviewed(tx, "missing", True, 40))
    assert await db.write(lambda tx: apps_repo.delete_app(tx, created.client_id))
    assert await db.read(lambda tx: apps_repo.get_app(tx, created.client_id)) is None


async def test_grant_has_scope_needs_an_active_grant_holding_the_scope(db):
    user, other = await _user(db), await _user(db)
    app = await _app(db, other)
    assert not await db.read(lambda tx: repo.grant_has_scope(tx, user, app.client_id, "chat:read"))
    grant = await _grant(db, user, app.client_id, {"chat:read", "stream:read"})
    assert await db.read(lambda tx: repo.grant_has_scope(tx, user, app.client_id, "chat:read"))
    assert not await db.read(lambda tx: repo.grant_has_scope(tx, user, app.client_id, "chat:write"))
    assert not await db.read(lambda tx: repo.grant_has_scope(tx, other, app.client_id, "chat:read"))
    revoked = await db.write(lambda tx: repo.revoke_grants(tx, [grant.id, grant.id], 50, "test"))
    assert [g.id for g in revoked] == [grant.id] and revoked[0].revoke_reason == "test"
    assert await db.write(lambda tx: repo.revoke_grants(tx, [grant.id], 60, "again")) == []
    assert not await db.read(lambda tx: repo.grant_has_scope(tx, user, app.client_id, "chat:read"))


async def test_withdrawing_an_operator_grant_narrows_active_grants(db):
    user = await _user(db)
    app = await _app(db, user)
    assert await db.write(lambda tx: repo.grant_app_scope(tx, app.client_id, "chat:moderate", 5))
    assert not await db.write(lambda tx: repo.grant_app_scope(tx, app.client_id, "chat:moderate", 6))
    assert await db.read(lambda tx: repo.app_scope_grants(tx, app.client_id)) == {"chat:moderate": 5}
    holding = await _grant(db, user, app.client_id, {"chat:read", "chat:moderate"}, "chat:read chat:moderate")
    without = await _grant(db, user, app.client_id, {"chat:read"})
    assert await db.write(lambda tx: repo.revoke_app_scope(tx, app.client_id, "chat:moderate", 7)) == (True, 1)
    after = await db.read(lambda tx: repo.get_grant(tx, holding.id))
    assert after.held == {"chat:read"} and after.consented_scope == "chat:read chat:moderate"
    assert (await db.read(lambda tx: repo.get_grant(tx, without.id))).held == {"chat:read"}
    assert await db.write(lambda tx: repo.revoke_app_scope(tx, app.client_id, "chat:moderate", 8)) == (False, 0)


async def test_codes_are_consumed_once(db):
    user = await _user(db)
    app = await _app(db, user)
    code = AuthorizationCode(
        "h1", app.client_id, user, "https://a.example/cb", True, "chat:read", "c" * 43, "S256", 1, 601
    )
    await db.write(lambda tx: repo.insert_code(tx, code))
    assert await db.read(lambda tx: repo.get_code(tx, "h1")) == code
    assert await db.write(lambda tx: repo.consume_code(tx, "h1", 100))
    assert not await db.write(lambda tx: repo.consume_code(tx, "h1", 101))
    grant = await _grant(db, user, app.client_id, {"chat:read"})
    await db.write(lambda tx: repo.attach_grant(tx, "h1", grant.id))
    used = await db.read(lambda tx: repo.get_code(tx, "h1"))
    assert used.used_at == 100 and used.grant_id == grant.id and used.redirect_uri_sent is True
    await db.write(lambda tx: repo.purge_expired(tx, 602, 0))
    assert await db.read(lambda tx: repo.get_code(tx, "h1")) is None


async def test_refresh_tokens_rotate_once_and_go_with_their_grant(db):
    user = await _user(db)
    app = await _app(db, user)
    grant = await _grant(db, user, app.client_id, set())
    await db.write(lambda tx: repo.insert_refresh_token(tx, "r1", grant.id, 10, 1000))
    assert await db.write(lambda tx: repo.rotate_refresh_token(tx, "r1", 20))
    assert not await db.write(lambda tx: repo.rotate_refresh_token(tx, "r1", 21))
    assert (await db.read(lambda tx: repo.get_refresh_token(tx, "r1"))).rotated_at == 20
    await db.write(lambda tx: apps_repo.delete_app(tx, app.client_id))
    assert await db.read(lambda tx: repo.get_refresh_token(tx, "r1")) is None
    assert await db.read(lambda tx: repo.get_grant(tx, grant.id)) is None
