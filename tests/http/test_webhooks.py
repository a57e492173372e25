"""Webhook routes: CRUD, ownership, event names, target policy, secrets, delivery log."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import RegisteredUser as Account
from tests.conftest import insert_app, make_settings
from tests.services.webhooks.support import FakeResolver
from volthub.http.runtime import Runtime

PUBLIC_IP = "93.184.215.14"


def rt_of(app: Any) -> Runtime:
    return app.extensions["volthub"]


@pytest.fixture
def resolver(app: Any) -> FakeResolver:
    fake = FakeResolver(
        {
            "hooks.example.com": [PUBLIC_IP],
            "internal.example.com": ["10.0.0.7"],
            "mixed.example.com": [PUBLIC_IP, "192.168.0.10"],
            "meta.example.com": ["169.254.169.254"],
            "v6private.example.com": ["fd12:3456::1"],
        }
    )
    rt_of(app).services.webhooks.deliverer.resolver = fake
    return fake


@pytest.fixture
async def owner(make_user: Any) -> Account:
    return await make_user()


@pytest.fixture
async def client_id(app: Any, owner: Account) -> str:
    return await insert_app(rt_of(app).db, owner.id)


def base(client_id: str) -> str:
    return f"/api/developer/apps/{client_id}/webhooks"


async def create(client: Any, user: Account, client_id: str, **body: Any) -> Any:
    body.setdefault("url", "https://hooks.example.com/in")
    body.setdefault("events", ["channel.follow"])
    return await client.post(base(client_id), json=body, headers=user.headers)


async def test_create_returns_the_secret_once(
    client: Any, owner: Account, client_id: str, resolver: FakeResolver
) -> None:
    response = await create(client, owner, client_id, events=["channel.follow", "user.follow", "channel.follow"])
    assert response.status_code == 201
    created = await response.get_json()
    assert created["secret"].startswith("whsec_")
    assert created["events"] == ["channel.follow", "user.follow"]
    assert created["enabled"] is True and created["status"] == "enabled"
    assert created["consecutiveFailures"] == 0 and created["url"] == "https://hooks.example.com/in"
    fetched = await (await client.get(f"{base(client_id)}/{created['id']}", headers=owner.headers)).get_json()
    assert "secret" not in fetched
    assert {k: v for k, v in created.items() if k != "secret"} == fetched
    listed = await (await client.get(base(client_id), headers=owner.headers)).get_json()
    assert listed == {"items": [fetched]}


async def test_another_users_app_is_not_found(
    client: Any, make_user: Any, client_id: str, resolver: FakeResolver
) -> None:
    stranger = await make_user()
    response = await create(client, stranger, client_id)
    assert response.status_code == 404
    assert (await response.get_json())["error"] == "not_found"
    assert (await client.get(base(client_id), headers=stranger.headers)).status_code == 404
    assert (await client.get(base("no_such_app"), headers=stranger.headers)).status_code == 404


async def test_routes_need_a_token(client: Any, client_id: str) -> None:
    assert (await client.get(base(client_id))).status_code == 401


async def test_unknown_event_names_are_listed(
    client: Any, owner: Account, client_id: str, resolver: FakeResolver
) -> None:
    response = await create(client, owner, client_id, events=["channel.follow", "channel.hype_train.begin", "nope"])
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"] == "unknown_events"
    assert body["details"]["unknown"] == ["channel.hype_train.begin", "nope"]


@pytest.mark.parametrize(
    "body",
    [
        {"url": "https://hooks.example.com/in", "events": []},
        {"url": "https://hooks.example.com/in"},
        {"events": ["channel.follow"]},
        {"url": 5, "events": ["channel.follow"]},
        {"url": "https://hooks.example.com/in", "events": "channel.follow"},
    ],
)
async def test_malformed_bodies_are_400(
    client: Any, owner: Account, client_id: str, resolver: FakeResolver, body: dict[str, Any]
) -> None:
    response = await client.post(base(client_id), json=body, headers=owner.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"] == "validation_error"


REFUSED = [
    ("http://hooks.example.com/in", "https_required"),
    ("https://127.0.0.1/in", "private_target"),
    ("https://127.1.2.3:8443/in", "private_target"),
    ("https://localhost/in", "private_target"),
    ("https://10.20.30.40/in", "private_target"),
    ("https://172.16.0.1/in", "private_target"),
    ("https://172.31.255.254/in", "private_target"),
    ("https://192.168.1.1/in", "private_target"),
    ("https://169.254.169.254/latest/meta-data", "private_target"),
    ("https://[::1]/in", "private_target"),
    ("https://[fc00::1]/in", "private_target"),
    ("https://[fd12:3456::1]/in", "private_target"),
    ("https://[fe80::1]/in", "private_target"),
    ("https://[::ffff:10.0.0.1]/in", "private_target"),
    ("https://internal.example.com/in", "private_target"),
    ("https://mixed.example.com/in", "private_target"),
    ("https://meta.example.com/in", "private_target"),
    ("https://v6private.example.com/in", "private_target"),
    ("https://unknown.example.com/in", "unresolvable_host"),
    ("https://user:pw@hooks.example.com/in", "userinfo_not_allowed"),
]


@pytest.mark.parametrize("url,code", REFUSED)
async def test_refused_targets_on_create(
    client: Any, owner: Account, client_id: str, resolver: FakeResolver, url: str, code: str
) -> None:
    response = await create(client, owner, client_id, url=url)
    assert response.status_code == 400
    body = await response.get_json()
    assert (body["error"], body["details"]["field"]) == (code, "url")
    assert (await (await client.get(base(client_id), headers=owner.headers)).get_json())["items"] == []


@pytest.mark.parametrize("url,code", [r for r in REFUSED if r[1] == "private_target"][::3])
async def test_refused_targets_on_patch(
    client: Any, owner: Account, client_id: str, resolver: FakeResolver, url: str, code: str
) -> None:
    created = await (await create(client, owner, client_id)).get_json()
    response = await client.patch(f"{base(client_id)}/{created['id']}", json={"url": url}, headers=owner.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"] == code
    after = await (await client.get(f"{base(client_id)}/{created['id']}", headers=owner.headers)).get_json()
    assert after["url"] == "https://hooks.example.com/in"


async def test_private_targets_allowed_when_configured(sqlite_url: str) -> None:
    from volthub.http.app import create_app

    application = create_app(make_settings(sqlite_url, webhooks={"allow_private_targets": True}))
    async with application.test_app():
        client = application.test_client()
        registered = await client.post(
            "/api/auth/register", json={"username": "opsuser", "password": "correct horse battery"}
        )
        body = await registered.get_json()
        user = Account(body["user"]["id"], "opsuser", body["token"], "")
        client_id = await insert_app(rt_of(application).db, user.id)
        for url in ("https://127.0.0.1:9443/in", "https://10.0.0.1/in", "https://[::1]/in"):
            response = await create(client, user, client_id, url=url)
            assert response.status_code == 201, await response.get_data(as_text=True)
        assert (await create(client, user, client_id, url="http://10.0.0.1/in")).status_code == 400


async def test_patch_changes_fields_and_refuses_null(
    client: Any, owner: Account, client_id: str, resolver: FakeResolver
) -> None:
    created = await (await create(client, owner, client_id)).get_json()
    path = f"{base(client_id)}/{created['id']}"
    response = await client.patch(
        path,
        json={"events": ["channel.cheer", "stream.online"], "url": "https://hooks.example.com/v2"},
        headers=owner.headers,
    )
    assert response.status_code == 200
    changed = await response.get_json()
    assert changed["events"] == ["channel.cheer", "stream.online"]
    assert changed["url"] == "https://hooks.example.com/v2"
    assert (await client.patch(path, json={"events": None}, headers=owner.headers)).status_code == 400
    assert (await client.patch(path, json={"events": ["bogus"]}, headers=owner.headers)).status_code == 400
    disabled = await (await client.patch(path, json={"enabled": False}, headers=owner.headers)).get_json()
    assert (disabled["enabled"], disabled["status"], disabled["disabledReason"]) == (False, "disabled", "owner")
    enabled = await (await client.patch(path, json={"enabled": True}, headers=owner.headers)).get_json()
    assert (enabled["enabled"], enabled["status"], enabled["disabledReason"]) == (True, "enabled", None)


async def test_rotate_secret_and_delete(client: Any, owner: Account, client_id: str, resolver: FakeResolver) -> None:
    created = await (await create(client, owner, client_id)).get_json()
    path = f"{base(client_id)}/{created['id']}"
    rotated = await (await client.post(f"{path}/rotate-secret", headers=owner.headers)).get_json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != created["secret"]
    assert rt_of(client.app).services.webhooks is not None
    assert (await client.delete(path, headers=owner.headers)).status_code == 204
    assert (await client.get(path, headers=owner.headers)).status_code == 404
    assert (await client.delete(path, headers=owner.headers)).status_code == 404


async def test_bad_ids_are_400(client: Any, owner: Account, client_id: str) -> None:
    response = await client.get(f"{base(client_id)}/not-a-uuid", headers=owner.headers)
    assert response.status_code == 400
    assert (await response.get_json())["error"] == "invalid_id"
    missing = await client.get(f"{base(client_id)}/{uuid.uuid4()}/deliveries", headers=owner.headers)
    assert missing.status_code == 404


async def test_delivery_log_pages_and_redelivery_of_unknown(
    client: Any, owner: Account, client_id: str, resolver: FakeResolver
) -> None:
    created = await (await create(client, owner, client_id)).get_json()
    path = f"{base(client_id)}/{created['id']}"
    empty = await (await client.get(f"{path}/deliveries?limit=5", headers=owner.headers)).get_json()
    assert empty == {"items": [], "nextCursor": None}
    assert (await client.get(f"{path}/deliveries?limit=101", headers=owner.headers)).status_code == 400
    assert (await client.get(f"{path}/deliveries?cursor=garbage", headers=owner.headers)).status_code == 400
    missing = await client.post(f"{path}/deliveries/{uuid.uuid4()}/redeliver", headers=owner.headers)
    assert missing.status_code == 404


async def test_too_many_webhooks(client: Any, owner: Account, client_id: str, resolver: FakeResolver) -> None:
    for _ in range(25):
        assert (await create(client, owner, client_id)).status_code == 201
    response = await create(client, owner, client_id)
    assert response.status_code == 409
    assert (await response.get_json())["error"] == "too_many_webhooks"


async def test_openapi_documents_the_routes(client: Any) -> None:
    document = await (await client.get("/api/openapi.json")).get_json()
    paths = document["paths"]
    assert "post" in paths["/api/developer/apps/{client_id}/webhooks"]
    assert "post" in paths["/api/developer/apps/{client_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"]
    assert "get" in paths["/api/notifications/unread-count"]


async def test_every_attempt_rechecks_where_the_name_resolves(
    client: Any, owner: Account, client_id: str, resolver: FakeResolver, make_user: Any, webhook_receiver: Any
) -> None:
    """DNS rebinding: public at creation, loopback at delivery time → refused, never sent."""
    import trio

    url = f"https://hooks.example.com:{webhook_receiver.port}/in"
    created = await (await create(client, owner, client_id, url=url)).get_json()
    resolver.table["hooks.example.com"] = ["127.0.0.1"]
    fan = await make_user()
    assert (await client.post(f"/api/users/follow/{owner.id}", headers=fan.headers)).status_code == 200
    path = f"{base(client_id)}/{created['id']}/deliveries"
    with trio.fail_after(10):
        while True:
            items = (await (await client.get(path, headers=owner.headers)).get_json())["items"]
            if items and items[0]["attempts"]:
                break
            await trio.sleep(0.05)  # real time: the dispatcher works in database threads and over a socket
    [attempt] = items[0]["attempts"]
    assert attempt["outcome"] == "failure" and attempt["statusCode"] is None
    assert attempt["error"].startswith("private_target")
    assert items[0]["status"] == "pending" and items[0]["nextAttemptAt"] is not None
    assert webhook_receiver.received == []


async def test_works_with_apps_from_the_developer_apps_route(
    client: Any, owner: Account, resolver: FakeResolver
) -> None:
    made = await client.post(
        "/api/developer/apps", json={"name": "Hook app", "redirectUris": []}, headers=owner.headers
    )
    assert made.status_code == 201, await made.get_data(as_text=True)
    client_id = (await made.get_json())["clientId"]
    assert (await create(client, owner, client_id)).status_code == 201
    # Deleting the app deletes its webhooks.
    assert (await client.delete(f"/api/developer/apps/{client_id}", headers=owner.headers)).status_code == 204
    assert (await client.get(base(client_id), headers=owner.headers)).status_code == 404
