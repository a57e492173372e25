from __future__ import annotations

import base64

import pytest

from volthub.protocol.oauth.client_auth import (
    MAX_CLIENT_ID_LENGTH,
    BasicCredentials,
    MalformedBasic,
    parse_basic,
    plausible_client_id,
)


def basic(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return "Basic " + base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (basic("app1:secret"), BasicCredentials("app1", "secret")),
        (basic("my%3Aapp:s%2Bx+y"), BasicCredentials("my:app", "s+x y")),  # form-decoded
        (basic("app:with:colons"), BasicCredentials("app", "with:colons")),
        (basic(":secret"), BasicCredentials("", "secret")),
        (basic("public:"), BasicCredentials("public", "")),
        ("basic " + base64.b64encode(b"a:b").decode(), BasicCredentials("a", "b")),  # scheme is case-insensitive
        ("Basic   " + base64.b64encode(b"a:b").decode() + " ", BasicCredentials("a", "b")),
    ],
)
def test_basic_credentials_are_decoded(header: str, expected: BasicCredentials) -> None:
    assert parse_basic(header) == expected


@pytest.mark.parametrize("header", [None, "", "Bearer abc", "Digest x", "Basicabc"])
def test_other_schemes_are_not_basic(header: str | None) -> None:
    assert parse_basic(header) is None


@pytest.mark.parametrize("header", [basic("no-colon"), "Basic !!!", basic(b"\xff\xfe:x"), "Basic YQ"])
def test_malformed_basic_is_refused(header: str) -> None:
    with pytest.raises(MalformedBasic):
        parse_basic(header)


@pytest.mark.parametrize("value", ["3f1c2a9e-8d1b-4c55-9a57-2f4b7f0e9d10", "a", "x" * MAX_CLIENT_ID_LENGTH])
def test_plausible_client_ids(value: str) -> None:
    assert plausible_client_id(value)


@pytest.mark.parametrize("value", ["", "x" * (MAX_CLIENT_ID_LENGTH + 1), "a\x00b", "é", "tab\there", "new\nline"])
def test_implausible_client_ids(value: str) -> None:
    assert not plausible_client_id(value)
