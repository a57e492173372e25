"""Browsers on other origins, over real HTTP: the API's preflights and headers on the main
port, errors included; the HTML pages staying same-origin; the Socket.IO paths on the mount
and the gateway; the gateway's chat send. A refused origin gets no CORS headers and is counted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
from prometheus_client import REGISTRY

from tests.conftest import LiveServer, RegisteredUser, make_settings, register_live, serve_app, served

ALLOWED = "https://overlay.example"
REFUSED = "https://elsewhere.example"
CHAT = "/api/integrations/oauth/chat/channels/{}/messages"
EXPOSED = "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, X-Request-Id"


def refused_count(paths: str) -> float:
    return REGISTRY.get_sample_value("volthub_cors_refused_requests_total", {"paths": paths}) or 0.0


def preflight_headers(origin: str, method: str = "POST") -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization, content-type",
    }


def assert_cross_origin(response: httpx.Response, origin: str = ALLOWED) -> None:
    assert response.headers.get("access-control-allow-origin") == origin, (response.status_code, response.headers)
    assert response.headers["access-control-expose-headers"] == EXPOSED
    assert "Origin" in response.headers.get("vary", "")
    assert "access-control-allow-credentials" not in response.headers


def assert_no_cors(response: httpx.Response) -> None:
    assert not any(name.lower().startswith("access-control-") for name in response.headers), response.headers


@pytest.fixture
async def server(sqlite_url: str, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    """Allowed: one origin. No payment provider, so a purchase gets 503."""
    settings = make_settings(
        sqlite_url,
        server={"cors_origins": [ALLOWED]},
        volts={"payment_provider": ""},
    )
    async with served(nursery, settings) as server:
        yield server


@pytest.fixture
async def user(server: LiveServer) -> RegisteredUser:
    return await register_live(server.url)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", CHAT.format("00000000-0000-0000-0000-000000000000")),
        ("POST", "/api/developer/oauth/token"),
        ("POST", "/api/developer/oauth/revoke"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("GET", "/api/events/stream"),
        ("DELETE", "/api/nothing/here"),
    ],
)
async def test_preflights_are_answered_204_before_authentication(server: LiveServer, method: str, path: str) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.options(path, headers=preflight_headers(ALLOWED, method))
    assert response.status_code == 204, response.text
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert response.headers["access-control-allow-methods"] == "GET, POST, PUT, PATCH, DELETE"
    assert response.headers["access-control-allow-headers"] == "authorization, content-type"
    assert response.headers["access-control-max-age"] == "7200"
    assert "Origin" in response.headers["vary"] and response.content == b""
    assert "access-control-allow-credentials" not in response.headers
    assert "x-ratelimit-limit" not in response.headers  # no budget was spent on it
    assert response.headers["x-request-id"]


async def test_preflights_spend_no_rate_limit(sqlite_url: str, nursery: trio.Nursery) -> None:
    settings = make_settings(sqlite_url, server={"cors_origins": [ALLOWED]}, ratelimit={"global_per_ip_per_minute": 2})
    stop = trio.Event()
    server = await serve_app(nursery, settings, stop)
    async with httpx.AsyncClient(base_url=server.url) as http:
        for _ in range(5):
            response = await http.options("/api/users/me", headers=preflight_headers(ALLOWED, "GET"))
            assert response.status_code == 204
        statuses = [(await http.get("/api/users/me", headers={"Origin": ALLOWED})) for _ in range(3)]
    assert [response.status_code for response in statuses] == [401, 401, 429]
    limited = statuses[-1]
    assert_cross_origin(limited)
    assert limited.headers["retry-after"] and limited.json()["error"] == "rate_limit_exceeded"
    stop.set()


async def test_every_answer_carries_the_origin_errors_included(server: LiveServer, user: RegisteredUser) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers={"Origin": ALLOWED}) as http:
        answers: dict[int, httpx.Response] = {
            200: await http.get("/api/users/me", headers=user.headers),
            401: await http.get("/api/users/me"),
            404: await http.get("/api/nothing/here", headers=user.headers),
            413: await http.post("/api/auth/login", content=b"{" + b" " * 70_000 + b"}", headers=_json()),
            503: await http.post("/api/volts/purchase", json={"amount": 10}, headers=user.headers),
        }
        metadata = await http.get("/.well-known/oauth-authorization-server")
    for status, response in answers.items():
        assert response.status_code == status, (status, response.text)
        assert_cross_origin(response)
    assert answers[503].json()["error"] == "payments_not_configured"
    assert metadata.status_code == 200
    assert_cross_origin(metadata)


def _json() -> dict[str, str]:
    return {"Content-Type": "application/json"}


async def test_the_token_endpoint_answers_a_browser_with_its_error(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post(
            "/api/developer/oauth/token",
            data={"grant_type": "authorization_code", "code": "nope", "client_id": "nobody"},
            headers={"Origin": ALLOWED},
        )
    assert response.status_code in (400, 401) and "error" in response.json()
    assert_cross_origin(response)


async def test_the_event_stream_answers_cross_origin(server: LiveServer, user: RegisteredUser) -> None:
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as http,
        http.stream(
            "GET",
            "/api/events/stream",
            headers={**user.headers, "Origin": ALLOWED, "Accept": "text/event-stream"},
        ) as stream,
    ):
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert_cross_origin(stream)  # type: ignore[arg-type]


async def test_a_refused_origin_gets_no_cors_headers_and_is_counted(server: LiveServer, user: RegisteredUser) -> None:
    before = refused_count("api")
    async with httpx.AsyncClient(base_url=server.url) as http:
        served = await http.get("/api/users/me", headers={**user.headers, "Origin": REFUSED})
        preflight = await http.options("/api/users/me", headers=preflight_headers(REFUSED, "GET"))
        same_origin = await http.post("/api/auth/login", json={}, headers={"Origin": server.url})
    assert served.status_code == 200  # served (a token is no cookie), but the browser may not read it
    assert_no_cors(served)
    assert served.headers["vary"] == "Origin"
    assert preflight.status_code == 403
    assert_no_cors(preflight)
    body = preflight.json()
    assert body["error"] == "origin_not_allowed" and body["details"]["origin"] == REFUSED
    assert body["details"]["requestId"] == preflight.headers["x-request-id"]
    assert same_origin.status_code == 400  # a same-origin write: no refusal to count
    assert refused_count("api") == before + 2


@pytest.mark.parametrize("path", ["/oauth/authorize?client_id=x", "/developer", "/docs", "/", "/healthz"])
async def test_html_pages_and_probes_stay_same_origin(server: LiveServer, path: str) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:  # /docs renders the whole API
        response = await http.get(path, headers={"Origin": ALLOWED, "Accept": "text/html"})
        preflight = await http.options(path, headers=preflight_headers(ALLOWED, "POST"))
    assert response.status_code < 500
    assert_no_cors(response)
    assert_no_cors(preflight)


async def test_any_origin_by_default_with_a_star_and_no_vary(sqlite_url: str, nursery: trio.Nursery) -> None:
    stop = trio.Event()
    server = await serve_app(nursery, make_settings(sqlite_url), stop)
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.get("/api/users/me", headers={"Origin": REFUSED})
        without_origin = await http.get("/api/developer/oauth/scopes")
        preflight = await http.options("/api/users/me", headers=preflight_headers(REFUSED, "GET"))
    assert_cross_origin_any(response)
    assert_cross_origin_any(without_origin)
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
    stop.set()


def assert_cross_origin_any(response: httpx.Response) -> None:
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["access-control-expose-headers"] == EXPOSED
    assert "vary" not in response.headers or "Origin" not in response.headers["vary"]


# ---------------------------------------------------------------------- Socket.IO paths


async def _polling_open(base: str, path: str, origin: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base) as http:
        return await http.get(path, params={"EIO": "4", "transport": "polling"}, headers={"Origin": origin})


@pytest.mark.parametrize("listener", ["mount", "gateway"])
async def test_socketio_paths_follow_the_server_origins(server: LiveServer, listener: str) -> None:
    base = server.url if listener == "mount" else server.events_url
    before = refused_count("events")
    allowed = await _polling_open(base, "/socket.io/", ALLOWED)
    refused = await _polling_open(base, "/ws/events/", REFUSED)
    async with httpx.AsyncClient(base_url=base) as http:
        preflight = await http.options("/socket.io/", headers=preflight_headers(ALLOWED))
        refused_preflight = await http.options("/socket.io/", headers=preflight_headers(REFUSED))
    assert allowed.status_code == 200 and allowed.text.startswith("0")
    assert allowed.headers["access-control-allow-origin"] == ALLOWED and allowed.headers["vary"] == "Origin"
    assert refused.status_code == 403 and refused.json()["code"] == 4
    assert_no_cors(refused)
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-methods"] == "GET, POST"
    assert refused_preflight.status_code == 403
    assert_no_cors(refused_preflight)
    assert refused_count("events") == before + 2


@pytest.mark.parametrize("listener", ["mount", "gateway"])
async def test_a_websocket_from_a_refused_origin_is_refused(server: LiveServer, listener: str) -> None:
    from trio_websocket import ConnectionRejected, open_websocket_url

    base = (server.url if listener == "mount" else server.events_url).replace("http://", "ws://")
    url = f"{base}/ws/events/?EIO=4&transport=websocket"
    with pytest.raises(ConnectionRejected) as rejected:
        async with open_websocket_url(url, extra_headers=[("Origin", REFUSED)]):
            pass
    assert rejected.value.status_code == 403
    async with open_websocket_url(url, extra_headers=[("Origin", ALLOWED)]) as ws:
        assert (await ws.get_message()).startswith("0")


async def test_events_origins_replace_the_server_origins_when_set(sqlite_url: str, nursery: trio.Nursery) -> None:
    settings = make_settings(
        sqlite_url, server={"cors_origins": [ALLOWED]}, events={"cors_origins": [REFUSED], "gateway_port": 0}
    )
    stop = trio.Event()
    server = await serve_app(nursery, settings, stop)
    own = await _polling_open(server.url, "/socket.io/", REFUSED)
    other = await _polling_open(server.url, "/socket.io/", ALLOWED)
    assert own.status_code == 200 and own.headers["access-control-allow-origin"] == REFUSED
    assert other.status_code == 403
    stop.set()


async def test_chat_send_on_the_gateway_answers_browsers_like_the_main_port(
    server: LiveServer, user: RegisteredUser
) -> None:
    path = CHAT.format(user.id)
    before = refused_count("api")
    async with httpx.AsyncClient(base_url=server.events_url) as http:
        preflight = await http.options(path, headers=preflight_headers(ALLOWED))
        refused_preflight = await http.options(path, headers=preflight_headers(REFUSED))
        unauthenticated = await http.post(path, json={"message": "hi"}, headers={"Origin": ALLOWED})
        refused = await http.post(path, json={"message": "hi"}, headers={"Origin": REFUSED})
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == ALLOWED
    assert preflight.headers["access-control-max-age"] == "7200" and "x-ratelimit-limit" not in preflight.headers
    assert refused_preflight.status_code == 403 and refused_preflight.json()["error"] == "origin_not_allowed"
    assert_no_cors(refused_preflight)
    assert unauthenticated.status_code == 401
    assert_cross_origin(unauthenticated)
    assert refused.status_code == 401
    assert_no_cors(refused)
    assert refused_count("api") == before + 2


async def test_the_openapi_document_says_which_operations_answer_cross_origin(client: Any) -> None:
    document = await (await client.get("/api/openapi.json")).get_json()
    marks = {
        (path, method): operation["x-cross-origin"]
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict) and "responses" in operation
    }
    assert marks[("/api/developer/oauth/token", "post")] is True
    assert marks[("/.well-known/oauth-authorization-server", "get")] is True
    assert marks[("/api/events/stream", "get")] is True
    assert marks[("/oauth/authorize", "get")] is False and marks[("/docs", "get")] is False
    assert all(marks[key] is key[0].startswith(("/api/", "/.well-known/")) for key in marks)
    assert "x-cross-origin" in document["info"]["description"]
