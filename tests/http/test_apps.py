"""Developer apps: create, list, read, patch, delete, rotate the secret, scope grants."""

from __future__ import annotations

import hashlib

import pytest

from tests.conftest import register
from tests.http.oauth.flow import (
    REDIRECT,
    bearer,
    create_app,
    grant_sensitive,
    oauth_tokens,
    owner_user_and_app,
    refresh,
    token_request,
)
from volthub.http.ratelimit import category_of


async def test_create_shows_the_secret_once_and_stores_its_hash(app, client):
    owner = await register(client)
    response = await client.post(
        "/api/developer/apps",
        json={
            "name": " My bot ",
            "redirectUris": [REDIRECT, "http://127.0.0.1:8765/cb", "com.example.app:/cb"],
            "description": "Posts alerts",
            "logoUrl": "https://cdn.example/logo.png",
            "botApp": True,
        },
        headers=owner.headers,
    )
    assert response.status_code == 201
    created = await response.get_json()
    assert created["name"] == "My bot" and created["botApp"] is True and created["public"] is False
    assert created["reviewed"] is False and created["clientSecret"].startswith("vhcs_")
    assert created["redirectUris"] == [REDIRECT, "http://127.0.0.1:8765/cb", "com.example.app:/cb"]

    stored = await app.extensions["volthub"].db.read(
        lambda tx: tx.scalar("SELECT client_secret_hash FROM apps WHERE client_id = ?", (created["clientId"],))
    )
    assert stored == hashlib.sha256(created["clientSecret"].encode()).hexdigest()

    listed = await (await client.get("/api/developer/apps", headers=owner.headers)).get_json()
    assert [a["clientId"] for a in listed["items"]] == [created["clientId"]]
    one = await (await client.get(f"/api/developer/apps/{created['clientId']}", headers=owner.headers)).get_json()
    assert "clientSecret" not in one and "clientSecret" not in listed["items"][0]
    assert one["logoUrl"] == "https://cdn.example/logo.png"


async def test_public_app_has_no_secret_and_cannot_rotate(client):
    owner = await register(client)
    dev = await create_app(client, owner, public=True)
    assert dev.client_secret is None
    rotate = await client.post(f"/api/developer/apps/{dev.client_id}/rotate-secret", headers=owner.headers)
    assert rotate.status_code == 400 and (await rotate.get_json())["error"] == "public_client"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 51}, "name"),
        ({"name": "ok", "redirectUris": ["javascript:alert(1)"]}, "redirectUris.0"),
        ({"name": "ok", "redirectUris": ["http://example.com/cb"]}, "redirectUris.0"),
        ({"name": "ok", "redirectUris": [REDIRECT, "https://app.example/cb#frag"]}, "redirectUris.1"),
        ({"name": "ok", "redirectUris": ["https://*.example/cb"]}, "redirectUris.0"),
        ({"name": "ok", "redirectUris": [REDIRECT, REDIRECT]}, "redirectUris"),
        ({"name": "ok", "redirectUris": [f"https://a.example/{i}" for i in range(11)]}, "redirectUris"),
        ({"name": "ok", "redirectUris": "https://app.example/cb"}, "redirectUris"),
        ({"name": "ok", "logoUrl": "http://cdn.example/logo.png"}, "logoUrl"),
        ({"name": "ok", "logoUrl": "javascript:alert(1)"}, "logoUrl"),
        ({"name": "ok", "public": "yes"}, "public"),
        ({"name": "ok", "description": "d" * 501}, "description"),
    ],
)
async def test_create_validation_names_the_field(client, body, field):
    owner = await register(client)
    response = await client.post("/api/developer/apps", json=body, headers=owner.headers)
    assert response.status_code == 400
    error = await response.get_json()
    assert error["error"] == "validation_error"
    assert field in [item["field"] for item in error["details"]["fields"]]
    listed = await (await client.get("/api/developer/apps", headers=owner.headers)).get_json()
    assert listed["items"] == []


async def test_app_without_redirect_uri_can_be_created(client):
    owner = await register(client)
    response = await client.post("/api/developer/apps", json={"name": "No redirect yet"}, headers=owner.headers)
    assert response.status_code == 201 and (await response.get_json())["redirectUris"] == []


async def test_someone_elses_app_is_404(client):
    owner, other = await register(client), await register(client)
    dev = await create_app(client, owner)
    base = f"/api/developer/apps/{dev.client_id}"
    for method, path, kwargs in [
        ("GET", base, {}),
        ("PATCH", base, {"json": {"name": "stolen"}}),
        ("DELETE", base, {}),
        ("POST", f"{base}/rotate-secret", {}),
        ("GET", f"{base}/scopes", {}),
    ]:
        response = await client.open(path, method=method, headers=other.headers, **kwargs)
        assert response.status_code == 404, (method, path)
        assert (await response.get_json())["error"] == "not_found"
    assert (await (await client.get(base, headers=owner.headers)).get_json())["name"] == "Test app"


async def test_patch_changes_only_what_is_sent(client):
    owner = await register(client)
    dev = await create_app(client, owner, description="first", logoUrl="https://cdn.example/a.png")
    base = f"/api/developer/apps/{dev.client_id}"
    response = await client.patch(
        base, json={"name": "Renamed", "logoUrl": None, "redirectUris": []}, headers=owner.headers
    )
    assert response.status_code == 200
    patched = await response.get_json()
    assert patched["name"] == "Renamed" and patched["logoUrl"] is None and patched["redirectUris"] == []
    assert patched["description"] == "first" and patched["public"] is False
    for body, field in [({"name": None}, "name"), ({"redirectUris": ["ftp://x"]}, "redirectUris.0")]:
        bad = await client.patch(base, json=body, headers=owner.headers)
        assert bad.status_code == 400, body
        error = await bad.get_json()
        assert field == error["details"].get("field") or field in [
            f["field"] for f in error["details"].get("fields", [])
        ]


async def test_rotating_the_secret_replaces_it(client):
    owner = await register(client)
    dev = await create_app(client, owner)
    response = await client.post(f"/api/developer/apps/{dev.client_id}/rotate-secret", headers=owner.headers)
    assert response.status_code == 200
    new_secret = (await response.get_json())["clientSecret"]
    assert new_secret != dev.client_secret
    form = {"grant_type": "refresh_token", "refresh_token": "vhrt_unknown"}
    old = await token_request(client, dev, form)
    assert old.status_code == 401 and (await old.get_json())["error"] == "invalid_client"
    dev.client_secret = new_secret
    fresh = await token_request(client, dev, form)
    assert fresh.status_code == 400 and (await fresh.get_json())["error"] == "invalid_grant"


async def test_scopes_shows_operator_grants_of_sensitive_scopes(app, client):
    owner = await register(client)
    dev = await create_app(client, owner)
    path = f"/api/developer/apps/{dev.client_id}/scopes"
    before = await (await client.get(path, headers=owner.headers)).get_json()
    assert before["reviewRequired"] is True and len(before["scopes"]) == 23
    by_name = {s["name"]: s for s in before["scopes"]}
    assert by_name["chat:read"]["granted"] is True and by_name["chat:read"]["sensitive"] is False
    sensitive = {n for n, s in by_name.items() if s["sensitive"]}
    assert sensitive == {
        "stream:key",
        "chat:moderate",
        "channel:roles:write",
        "channel:interactive:write",
        "payments:write",
    }
    assert not any(by_name[n]["granted"] for n in sensitive)

    await grant_sensitive(app, dev.client_id, "chat:moderate")
    after = {s["name"]: s for s in (await (await client.get(path, headers=owner.headers)).get_json())["scopes"]}
    assert after["chat:moderate"]["granted"] is True and after["chat:moderate"]["grantedAt"]
    assert after["stream:key"]["granted"] is False and after["stream:key"]["grantedAt"] is None


async def test_oauth_tokens_cannot_manage_apps(client):
    _, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev, scope="user:write")
    response = await client.get("/api/developer/apps", headers=bearer(tokens["access_token"]))
    assert response.status_code == 403 and (await response.get_json())["error"] == "first_party_only"


async def test_deleting_an_app_revokes_its_connections(app, client):
    owner, user, dev = await owner_user_and_app(client)
    tokens = await oauth_tokens(client, user, dev, scope="chat:read")
    seen = []
    app.extensions["volthub"].bus.subscribe(seen.append)

    response = await client.delete(f"/api/developer/apps/{dev.client_id}", headers=owner.headers)
    assert response.status_code == 204
    assert (await client.get(f"/api/developer/apps/{dev.client_id}", headers=owner.headers)).status_code == 404
    assert (await client.get("/api/users/me", headers=bearer(tokens["access_token"]))).status_code == 401
    assert (await refresh(client, dev, tokens["refresh_token"])).status_code == 401  # the client is gone
    [event] = [e for e in seen if e.name == "user.authorization.revoke"]
    assert (
        event.channel_id == owner.id
        and event.data["clientId"] == dev.client_id
        and event.data["scopes"] == ["chat:read"]
    )


def test_app_creation_is_tagged_for_its_rate_limit():
    from volthub.http.blueprints import developer_apps

    assert category_of(developer_apps.create_app) == "app_create"
