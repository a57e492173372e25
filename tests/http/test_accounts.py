import pytest

from tests.conftest import register
from volthub.hub.clock import TrioClock


async def test_register_login_and_me(client):
    response = await client.post(
        "/api/auth/register",
        json={"username": "Streamer_1", "password": "hunter2hunter2", "displayName": " Streamer One "},
    )
    assert response.status_code == 201
    body = await response.get_json()
    assert body["user"]["username"] == "Streamer_1" and body["user"]["displayName"] == "Streamer One"
    assert body["tokenType"] == "Bearer" and body["token"]

    login = await client.post("/api/auth/login", json={"username": "streamer_1", "password": "hunter2hunter2"})
    assert login.status_code == 200
    token = (await login.get_json())["token"]
    me = await client.get("/api/users/me", headers={"Authorization": f"Bearer {token}"})
    assert (await me.get_json())["id"] == body["user"]["id"]


async def test_username_taken_case_insensitively(client):
    await register(client, "Taken_Name")
    response = await client.post("/api/auth/register", json={"username": "taken_NAME", "password": "x" * 8})
    assert response.status_code == 409
    assert (await response.get_json())["error"] == "username_taken"


async def test_wrong_password_and_unknown_user_look_the_same(client):
    user = await register(client)
    for body in (
        {"username": user.username, "password": "wrong password"},
        {"username": "nobody_here", "password": "whatever1"},
    ):
        response = await client.post("/api/auth/login", json=body)
        assert response.status_code == 401
        body = await response.get_json()
        assert body == {
            "error": "invalid_credentials",
            "message": "username or password is wrong",
            "details": {"requestId": response.headers["X-Request-Id"]},
        }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"password": "long enough"}, "username"),
        ({"username": "ab", "password": "long enough"}, "username"),
        ({"username": "a" * 26, "password": "long enough"}, "username"),
        ({"username": "has space", "password": "long enough"}, "username"),
        ({"username": "ümlaut", "password": "long enough"}, "username"),
        ({"username": "me", "password": "long enough"}, "username"),
        ({"username": "search", "password": "long enough"}, "username"),
        ({"username": 12345, "password": "long enough"}, "username"),
        ({"username": "fine_name", "password": "short"}, "password"),
        ({"username": "fine_name", "password": "p" * 129}, "password"),
        ({"username": "fine_name", "password": 12345678}, "password"),
        ({"username": "fine_name", "password": "long enough", "displayName": "   "}, "displayName"),
        ({"username": "fine_name", "password": "long enough", "displayName": "d" * 51}, "displayName"),
    ],
)
async def test_register_validation_names_the_field(client, body, field):
    response = await client.post("/api/auth/register", json=body)
    assert response.status_code == 400
    error = await response.get_json()
    assert error["error"] == "validation_error"
    assert field in [item["field"] for item in error["details"]["fields"]]
    assert (
        await client.post("/api/auth/login", json={"username": "fine_name", "password": "long enough"})
    ).status_code == 401


@pytest.mark.parametrize(
    ("kwargs", "status", "code"),
    [
        ({"data": "{not json", "headers": {"Content-Type": "application/json"}}, 400, "invalid_json"),
        ({"data": '{"username": NaN}', "headers": {"Content-Type": "application/json"}}, 400, "invalid_json"),
        ({"data": b'{"username": "\xff"}', "headers": {"Content-Type": "application/json"}}, 400, "invalid_json"),
        (
            {"data": "username=x", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
            415,
            "unsupported_media_type",
        ),
        ({"data": "hello", "headers": {"Content-Type": "text/plain"}}, 415, "unsupported_media_type"),
        ({"json": ["a", "list"]}, 400, "validation_error"),
        ({"json": None}, 400, "validation_error"),
        (
            {"data": '{"username": "' + "x" * 70_000 + '"}', "headers": {"Content-Type": "application/json"}},
            413,
            "payload_too_large",
        ),
    ],
)
async def test_malformed_bodies_get_error_bodies(client, kwargs, status, code):
    response = await client.post("/api/auth/register", **kwargs)
    assert response.status_code == status
    body = await response.get_json()
    assert body["error"] == code and isinstance(body["message"], str)


async def test_quart_404_and_405_use_the_error_body(client):
    missing = await client.get("/api/no/such/route")
    assert missing.status_code == 404 and (await missing.get_json())["error"] == "not_found"
    wrong = await client.delete("/api/auth/login")
    assert wrong.status_code == 405 and (await wrong.get_json())["error"] == "method_not_allowed"
    assert "POST" in wrong.headers["Allow"]


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "missing_token"),
        ("Bearer", "invalid_token"),
        ("Basic dXNlcjpwYXNz", "invalid_token"),
        ("Bearer not.a.jwt", "invalid_token"),
        ("Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "invalid_token"),
    ],
)
async def test_bad_tokens_are_401(client, header, code):
    headers = {"Authorization": header} if header else {}
    response = await client.get("/api/users/me", headers=headers)
    assert response.status_code == 401
    assert (await response.get_json())["error"] == code
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_expired_token_is_refused(app, client):
    user = await register(client)
    tokens = app.extensions["volthub"].tokens
    clock = tokens._clock
    tokens._clock = TrioClock(start=clock.now() + 8 * 24 * 3600)  # a week and a day from now
    try:
        response = await client.get("/api/users/me", headers=user.headers)
    finally:
        tokens._clock = clock
    assert response.status_code == 401
    assert (await response.get_json())["message"] == "token has expired"


async def test_token_signed_with_another_secret_is_refused(client):
    import jwt

    forged = jwt.encode(
        {"typ": "session", "sub": "x", "iss": "volthub", "exp": 4_000_000_000},
        "not-the-secret-but-long-enough-for-hs256-keys",
        algorithm="HS256",
    )
    response = await client.get("/api/users/me", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401


@pytest.mark.parametrize(
    "request_args",
    [
        ("POST", "/api/auth/login", {"json": {"username": "nul\u0000name", "password": "whatever1"}}),
        ("POST", "/api/auth/register", {"json": {"username": "okname", "password": "pass\u0000word"}}),
        ("GET", "/api/users/search?q=a%00b", {}),
        ("GET", "/api/users/na%00me", {}),
    ],
)
async def test_nul_characters_are_refused_on_both_backends(database_url, request_args):
    from tests.conftest import make_settings, running_app

    method, path, kwargs = request_args
    async with running_app(make_settings(database_url)) as (_, client):
        response = await client.open(path, method=method, **kwargs)
    assert response.status_code == 400
    assert (await response.get_json())["error"] == "invalid_request"
