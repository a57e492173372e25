"""Validation of the HTTP request of an Engine.IO endpoint."""

from __future__ import annotations

import orjson
import pytest

from volthub.protocol.engineio.handshake import (
    EngineIORequest,
    ErrorCode,
    HttpError,
    RequestKind,
    http_error,
    validate_request,
)

SESSIONS = {"known": object()}


def check(method: str, query: dict, *, websocket: bool = False, **kw: object) -> EngineIORequest | HttpError:
    return validate_request(method, query, websocket=websocket, sessions=SESSIONS, **kw)


def assert_error(result: object, status: int, code: ErrorCode, message: str) -> None:
    assert isinstance(result, HttpError)
    assert result.status == status
    assert result.code is code
    assert orjson.loads(result.body) == {"code": int(code), "message": message}


@pytest.mark.parametrize(
    ("method", "query", "websocket", "expected"),
    [
        ("GET", {"EIO": "4", "transport": "polling"}, False, (RequestKind.OPEN, "polling", None)),
        ("GET", {"EIO": "4", "transport": "websocket"}, True, (RequestKind.OPEN, "websocket", None)),
        ("GET", {"EIO": "4", "transport": "polling", "sid": "known"}, False, (RequestKind.POLL, "polling", "known")),
        ("post", {"EIO": "4", "transport": "polling", "sid": "known"}, False, (RequestKind.SEND, "polling", "known")),
        (
            "GET",
            {"EIO": "4", "transport": "websocket", "sid": "known"},
            True,
            (RequestKind.UPGRADE, "websocket", "known"),
        ),
        # the cache-busting "t" parameter and unknown parameters are ignored
        (
            "GET",
            {"EIO": "4", "transport": "polling", "t": "N8hyd6w", "token": "x"},
            False,
            (RequestKind.OPEN, "polling", None),
        ),
        # an empty sid means "no session yet", as in the reference server
        ("GET", {"EIO": "4", "transport": "polling", "sid": ""}, False, (RequestKind.OPEN, "polling", None)),
    ],
)
def test_valid_requests(method: str, query: dict, websocket: bool, expected: tuple) -> None:
    assert check(method, query, websocket=websocket) == EngineIORequest(*expected)


@pytest.mark.parametrize(
    "query",
    [
        {"transport": "polling"},
        {"EIO": "abc", "transport": "polling"},
        {"EIO": "3", "transport": "polling"},
        {"EIO": "", "transport": "polling"},
    ],
)
def test_bad_eio_is_unsupported_protocol_version(query: dict) -> None:
    assert_error(check("GET", query), 400, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")


def test_bad_eio_over_websocket() -> None:
    result = check("GET", {"EIO": "3", "transport": "websocket"}, websocket=True)
    assert_error(result, 400, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")


@pytest.mark.parametrize(
    "query", [{"EIO": "4"}, {"EIO": "4", "transport": "abc"}, {"EIO": "4", "transport": "flashsocket"}]
)
def test_missing_or_unknown_transport(query: dict) -> None:
    assert_error(check("GET", query), 400, ErrorCode.UNKNOWN_TRANSPORT, "Transport unknown")


def test_transport_disabled_by_settings_is_unknown() -> None:
    result = check("GET", {"EIO": "4", "transport": "polling"}, transports=("websocket",))
    assert_error(result, 400, ErrorCode.UNKNOWN_TRANSPORT, "Transport unknown")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_handshake_must_be_get(method: str) -> None:
    result = check(method, {"EIO": "4", "transport": "polling"})
    assert_error(result, 400, ErrorCode.BAD_HANDSHAKE_METHOD, "Bad handshake method")


@pytest.mark.parametrize(("transport", "websocket"), [("polling", False), ("websocket", True)])
def test_unknown_sid(transport: str, websocket: bool) -> None:
    result = check("GET", {"EIO": "4", "transport": transport, "sid": "nope"}, websocket=websocket)
    assert_error(result, 400, ErrorCode.UNKNOWN_SID, "Session ID unknown")
    post = check("POST", {"EIO": "4", "transport": "polling", "sid": "nope"})
    assert_error(post, 400, ErrorCode.UNKNOWN_SID, "Session ID unknown")


@pytest.mark.parametrize(
    ("method", "query", "websocket"),
    [
        ("GET", {"EIO": "4", "transport": "websocket"}, False),  # plain HTTP naming websocket
        ("GET", {"EIO": "4", "transport": "polling"}, True),  # WebSocket naming polling
        ("PUT", {"EIO": "4", "transport": "polling", "sid": "known"}, False),
        ("GET", {"EIO": "4", "transport": "polling", "j": "0"}, False),  # JSONP is not served
    ],
)
def test_bad_requests(method: str, query: dict, websocket: bool) -> None:
    assert_error(check(method, query, websocket=websocket), 400, ErrorCode.BAD_REQUEST, "Bad request")


def test_list_valued_query_mappings() -> None:
    result = check("GET", {"EIO": ["4"], "transport": ["polling", "websocket"]})
    assert result == EngineIORequest(RequestKind.OPEN, "polling", None)


def test_forbidden_is_403() -> None:
    assert_error(http_error(ErrorCode.FORBIDDEN), 403, ErrorCode.FORBIDDEN, "Forbidden")
    assert http_error(ErrorCode.BAD_REQUEST, status=413).status == 413
