"""The CORS policy, decided without I/O."""

from __future__ import annotations

import pytest

from volthub.protocol.cors import (
    ALLOW_ANY,
    CorsPolicy,
    Kind,
    answers_cross_origin,
    is_origin,
    with_headers,
)

OVERLAY = "https://overlay.example"
LISTED = CorsPolicy.of([OVERLAY, "http://127.0.0.1:5173"])


def headers_of(**named: str) -> list[tuple[bytes, bytes]]:
    return [(name.replace("_", "-").encode(), value.encode()) for name, value in named.items()]


def preflight(policy: CorsPolicy, origin: str, requested: str = "authorization, content-type") -> dict[bytes, bytes]:
    verdict = policy.judge(
        "OPTIONS",
        headers_of(Origin=origin, Access_Control_Request_Method="POST", Access_Control_Request_Headers=requested),
    )
    assert verdict.kind is Kind.PREFLIGHT
    return dict(verdict.headers)


def test_a_preflight_from_a_listed_origin_gets_methods_headers_and_max_age() -> None:
    answer = preflight(LISTED, OVERLAY)
    assert answer[b"access-control-allow-origin"] == OVERLAY.encode()
    assert answer[b"access-control-allow-methods"] == b"GET, POST, PUT, PATCH, DELETE"
    assert answer[b"access-control-allow-headers"] == b"authorization, content-type"
    assert answer[b"access-control-max-age"] == b"7200"
    assert answer[b"vary"] == b"Origin, Access-Control-Request-Headers"
    assert b"access-control-allow-credentials" not in answer


def test_any_origin_is_answered_with_a_star_and_no_vary_on_origin() -> None:
    answer = preflight(ALLOW_ANY, "https://anything.example")
    assert answer[b"access-control-allow-origin"] == b"*"
    assert answer[b"vary"] == b"Access-Control-Request-Headers"
    served = ALLOW_ANY.judge("GET", headers_of(Origin="https://anything.example"))
    assert served.kind is Kind.SERVE and not served.refused
    assert dict(served.headers)[b"access-control-allow-origin"] == b"*"
    assert b"vary" not in dict(served.headers)


def test_a_preflight_from_an_unlisted_origin_is_refused_without_cors_headers() -> None:
    verdict = LISTED.judge("OPTIONS", headers_of(Origin="https://evil.example", Access_Control_Request_Method="GET"))
    assert verdict.kind is Kind.REFUSED_PREFLIGHT and verdict.refused and verdict.headers == []
    assert verdict.origin == "https://evil.example"


def test_an_options_request_without_a_requested_method_is_not_a_preflight() -> None:
    verdict = LISTED.judge("OPTIONS", headers_of(Origin=OVERLAY))
    assert verdict.kind is Kind.SERVE


def test_answers_to_a_listed_origin_name_it_expose_the_client_headers_and_vary_on_origin() -> None:
    answer = dict(LISTED.judge("GET", headers_of(Origin="HTTPS://Overlay.Example")).headers)
    assert answer[b"access-control-allow-origin"] == b"HTTPS://Overlay.Example"
    exposed = answer[b"access-control-expose-headers"].decode().split(", ")
    assert exposed == ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "X-Request-Id"]
    assert answer[b"vary"] == b"Origin"


def test_an_unlisted_origin_gets_only_vary_and_is_counted_as_refused() -> None:
    verdict = LISTED.judge("POST", headers_of(Origin="https://evil.example", Host="api.example"))
    assert verdict.refused and verdict.headers == [(b"vary", b"Origin")]


def test_same_origin_writes_and_requests_without_origin_are_not_refusals() -> None:
    same = LISTED.judge("POST", headers_of(Origin="https://api.example", Host="api.example"))
    assert not same.refused and dict(same.headers) == {b"vary": b"Origin"}
    none = LISTED.judge("GET", headers_of(Host="api.example"))
    assert not none.refused and dict(none.headers) == {b"vary": b"Origin"}


def test_an_empty_list_allows_no_origin() -> None:
    assert CorsPolicy.of([]).judge("GET", headers_of(Origin=OVERLAY)).refused


@pytest.mark.parametrize("requested", ["x-a\r\nset-cookie: a", "a b", "(bad)", "a," * 2000])
def test_requested_headers_that_are_not_a_header_list_are_not_echoed(requested: str) -> None:
    assert b"access-control-allow-headers" not in preflight(LISTED, OVERLAY, requested)


def test_cross_origin_paths_are_the_api_and_the_metadata_only() -> None:
    assert answers_cross_origin("/api/users/me") and answers_cross_origin("/.well-known/oauth-authorization-server")
    for path in ("/oauth/authorize", "/developer", "/docs", "/", "/metrics", "/healthz", "/apiary"):
        assert not answers_cross_origin(path)


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        (OVERLAY, True),
        ("http://127.0.0.1:5173", True),
        ("app://local", True),
        ("https://overlay.example/", False),
        ("https://overlay.example/path", False),
        ("overlay.example", False),
        ("*.example", False),
    ],
)
def test_origins_are_scheme_host_and_port_only(text: str, valid: bool) -> None:
    assert is_origin(text) is valid


def test_vary_is_extended_not_repeated() -> None:
    merged = with_headers([(b"Vary", b"Accept"), (b"content-type", b"text/plain")], [(b"vary", b"Origin")])
    assert merged == [(b"Vary", b"Accept, Origin"), (b"content-type", b"text/plain")]


def test_pages_without_an_origin_of_their_own_are_allowed_only_when_null_is_listed() -> None:
    assert LISTED.judge("GET", headers_of(Origin="null")).refused
    answer = dict(CorsPolicy.of(["null"]).judge("GET", headers_of(Origin="null")).headers)
    assert answer[b"access-control-allow-origin"] == b"null"
