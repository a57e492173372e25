from __future__ import annotations

import contextlib
from urllib.parse import parse_qsl, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from volthub.protocol.oauth.redirects import (
    MAX_REDIRECT_URI_LENGTH,
    InvalidRedirectURI,
    build_redirect,
    match_redirect_uri,
    validate_registered_uri,
)

# --- validate_registered_uri ---------------------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example.com/callback",
        "https://app.example.com",
        "https://app.example.com:8443/oauth/cb?tenant=a&x=1",
        "https://APP.Example.com/cb",
        "https://203.0.113.7/cb",
        "https://[2001:db8::1]:443/cb",
        "https://xn--bcher-kva.example/cb",
        "https://app.example.com/cb%20x",
        "http://127.0.0.1/cb",
        "http://127.0.0.1:53682/callback",
        "http://[::1]:8080/cb",
        "http://localhost:3000/auth/callback",
        "http://LOCALHOST:3000/cb",
        "com.example.app:/oauth2redirect",
        "com.example.app:/callback?x=1",
        "com.example.app://callback",
        "io.volthub.bot-helper:/cb",
    ],
)
def test_accepts(uri: str) -> None:
    assert validate_registered_uri(uri) == uri


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("", "non-empty"),
        ("/callback", "absolute"),
        ("app.example.com/callback", "absolute"),
        ("//app.example.com/cb", "absolute"),
        ("https://app.example.com/cb#frag", "fragment"),
        ("https://app.example.com/cb#", "fragment"),
        ("http://app.example.com/cb", "loopback"),
        ("http://127.0.0.2/cb", "loopback"),
        ("http://localhost.evil.com/cb", "loopback"),
        ("http://0.0.0.0/cb", "loopback"),
        ("https:///cb", "host"),
        ("https:/app.example.com/cb", "host"),
        ("https://user:pw@app.example.com/cb", "user information"),
        ("https://evil.com@app.example.com/cb", "user information"),
        ("https://*.example.com/cb", "host"),
        ("https://app..example.com/cb", "host"),
        ("https://-app.example.com/cb", "host"),
        ("https://app.example.com:99999/cb", "port"),
        ("https://app.example.com:http/cb", "port"),
        ("https://[::1/cb", "host"),
        ("https://[zz::1]/cb", "host"),
        ("https://app.example.com/c b", "characters"),
        ("https://app.example.com/cb\n", "characters"),
        (" https://app.example.com/cb", "characters"),
        ('https://app.example.com/"><script>', "characters"),
        ("https://app.example.com/cb%zz", "characters"),
        ("https://bücher.example/cb", "characters"),
        ("javascript:alert(1)", "reverse-DNS"),
        ("data:text/html,hi", "reverse-DNS"),
        ("file:///etc/passwd", "reverse-DNS"),
        ("myapp:/cb", "reverse-DNS"),
        ("com..app:/cb", "reverse-DNS"),
        ("com.app.:/cb", "reverse-DNS"),
        ("com.example.app:", "nothing after"),
        ("ftp://example.com/cb", "reverse-DNS"),
    ],
)
def test_rejects(uri: str, why: str) -> None:
    with pytest.raises(InvalidRedirectURI) as info:
        validate_registered_uri(uri)
    assert why in info.value.message


def test_length_limit() -> None:
    base = "https://app.example.com/"
    ok = base + "a" * (MAX_REDIRECT_URI_LENGTH - len(base))
    assert validate_registered_uri(ok) == ok
    with pytest.raises(InvalidRedirectURI, match="longer"):
        validate_registered_uri(ok + "a")


@pytest.mark.parametrize("value", [None, 42, b"https://app.example.com/cb"])
def test_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidRedirectURI):
        validate_registered_uri(value)  # type: ignore[arg-type]


@given(st.text(max_size=200))
def test_random_text_raises_only_invalid_redirect_uri(uri: str) -> None:
    with contextlib.suppress(InvalidRedirectURI):
        assert validate_registered_uri(uri) == uri


# --- match_redirect_uri --------------------------------------------------------------------

REGISTERED = ["https://app.example.com/cb", "http://127.0.0.1:8080/cb", "com.example.app:/cb"]


@pytest.mark.parametrize("uri", REGISTERED)
def test_exact_match(uri: str) -> None:
    assert match_redirect_uri(uri, REGISTERED) == uri


@pytest.mark.parametrize(
    "requested",
    [
        "https://app.example.com/cb/",
        "https://app.example.com/cb?x=1",
        "https://app.example.com/CB",
        "https://APP.example.com/cb",
        "HTTPS://app.example.com/cb",
        "https://app.example.com:443/cb",
        "https://app.example.com/cb#x",
        "https://app.example.com/cb/../cb",
        "https://app.example.com/c%62",
        "https://app.example.com.evil.com/cb",
        "https://app.example.com/cbx",
        "http://127.0.0.1:9090/cb",  # loopback port variance is not supported
        "http://127.0.0.1/cb",
        "http://localhost:8080/cb",
        " https://app.example.com/cb",
    ],
)
def test_no_fuzzy_match(requested: str) -> None:
    assert match_redirect_uri(requested, REGISTERED) is None


def test_omitted_uses_single_registered() -> None:
    assert match_redirect_uri(None, ["https://a.example/cb"]) == "https://a.example/cb"
    assert match_redirect_uri("", ["https://a.example/cb"]) == "https://a.example/cb"
    assert match_redirect_uri(None, ["https://a.example/cb"], allow_default=False) is None
    assert match_redirect_uri(None, REGISTERED) is None
    assert match_redirect_uri(None, []) is None
    assert match_redirect_uri("https://a.example/cb", []) is None


# --- build_redirect -------------------------------------------------------------------------


def test_build_adds_query() -> None:
    url = build_redirect("https://app.example.com/cb", {"code": "abc", "state": "xyz"})
    assert url == "https://app.example.com/cb?code=abc&state=xyz"


def test_build_keeps_existing_query() -> None:
    url = build_redirect("https://app.example.com/cb?tenant=a%2Fb&x", {"code": "abc"})
    assert url == "https://app.example.com/cb?tenant=a%2Fb&x&code=abc"


@pytest.mark.parametrize("base", ["https://app.example.com/cb?", "https://app.example.com/cb?a=1&"])
def test_build_no_double_separator(base: str) -> None:
    assert build_redirect(base, {"code": "c"}) == base + "code=c"


def test_build_error_params_encoded() -> None:
    url = build_redirect(
        "com.example.app:/cb",
        {"error": "access_denied", "error_description": "The user denied access & left", "state": "a b+c/=?#"},
    )
    assert url.startswith("com.example.app:/cb?error=access_denied&")
    assert "#" not in url and " " not in url and "+" not in url
    assert dict(parse_qsl(urlsplit(url).query)) == {
        "error": "access_denied",
        "error_description": "The user denied access & left",
        "state": "a b+c/=?#",
    }


def test_build_drops_none_and_keeps_order() -> None:
    url = build_redirect("https://a.example/cb", {"code": "1", "state": None, "iss": "https://v.example"})
    assert url == "https://a.example/cb?code=1&iss=https%3A%2F%2Fv.example"
    assert build_redirect("https://a.example/cb", {"state": None}) == "https://a.example/cb"


def test_build_puts_query_before_a_fragment() -> None:
    assert build_redirect("https://a.example/cb#f", {"code": "1"}) == "https://a.example/cb?code=1#f"


@given(st.dictionaries(st.text(min_size=1), st.text(), max_size=5))
def test_build_roundtrips_through_a_form_decoder(params: dict[str, str]) -> None:
    url = build_redirect("https://a.example/cb?keep=1", params)
    decoded = parse_qsl(urlsplit(url).query, keep_blank_values=True, errors="surrogatepass")
    assert decoded[0] == ("keep", "1")
    assert dict(decoded[1:]) == params
