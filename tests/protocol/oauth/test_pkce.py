from __future__ import annotations

import base64
import contextlib
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from volthub.protocol.oauth.pkce import PKCEError, effective_method, s256_challenge, validate_challenge, verify

# RFC 7636 Appendix B: 32 random octets, the verifier they encode to, and its S256 challenge.
APPENDIX_B_OCTETS = bytes(
    [116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186,
     22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121]
)  # fmt: skip
APPENDIX_B_VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
APPENDIX_B_CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
verifiers = st.text(alphabet=UNRESERVED, min_size=43, max_size=128)


def test_appendix_b_vector() -> None:
    assert base64.urlsafe_b64encode(APPENDIX_B_OCTETS).rstrip(b"=").decode() == APPENDIX_B_VERIFIER
    assert s256_challenge(APPENDIX_B_VERIFIER) == APPENDIX_B_CHALLENGE
    validate_challenge(APPENDIX_B_CHALLENGE, "S256")
    assert verify(APPENDIX_B_VERIFIER, APPENDIX_B_CHALLENGE, "S256")


def test_appendix_b_wrong_verifier_or_method() -> None:
    other = APPENDIX_B_VERIFIER[:-1] + "l"
    assert not verify(other, APPENDIX_B_CHALLENGE, "S256")
    # The S256 challenge used as if it were plain does not accept the verifier.
    assert not verify(APPENDIX_B_VERIFIER, APPENDIX_B_CHALLENGE, "plain")
    assert not verify(APPENDIX_B_VERIFIER, APPENDIX_B_CHALLENGE, None)
    # Downgrade: sending the challenge itself as the verifier does not pass S256.
    assert not verify(APPENDIX_B_CHALLENGE, APPENDIX_B_CHALLENGE, "S256")


def test_plain_method_and_default() -> None:
    v = "a" * 43
    validate_challenge(v, "plain")
    validate_challenge(v, None)  # RFC 7636 §4.3: method defaults to plain
    validate_challenge(v, "")
    assert verify(v, v, "plain")
    assert verify(v, v, None)
    assert verify(v, v, "")
    assert not verify(v, "b" * 43, "plain")
    assert effective_method(None) == "plain" and effective_method("S256") == "S256"


# --- validate_challenge ------------------------------------------------------------------


def test_no_pkce_is_allowed() -> None:
    validate_challenge(None, None)
    validate_challenge("", "")


@pytest.mark.parametrize("method", ["S256", "plain", "bogus"])
def test_method_without_challenge(method: str) -> None:
    with pytest.raises(PKCEError) as info:
        validate_challenge(None, method)
    assert info.value.error == "invalid_request"


@pytest.mark.parametrize("method", ["s256", "SHA256", "S512", "PLAIN", "none", " S256"])
def test_unsupported_method(method: str) -> None:
    with pytest.raises(PKCEError):
        validate_challenge(APPENDIX_B_CHALLENGE, method)


@pytest.mark.parametrize(
    "challenge",
    [
        APPENDIX_B_CHALLENGE[:-1],  # 42 characters
        APPENDIX_B_CHALLENGE + "A",  # 44 characters
        APPENDIX_B_CHALLENGE + "=",  # padded
        APPENDIX_B_CHALLENGE[:-1] + "+",  # standard, not url-safe, alphabet
        APPENDIX_B_CHALLENGE[:-1] + "/",
        APPENDIX_B_CHALLENGE[:-1] + ".",
        APPENDIX_B_CHALLENGE[:-1] + "~",
        APPENDIX_B_CHALLENGE[:-1] + "N",  # non-zero spare bits: no digest encodes to this
        APPENDIX_B_CHALLENGE + "\n",
        "a" * 128,
    ],
)
def test_bad_s256_challenge(challenge: str) -> None:
    with pytest.raises(PKCEError):
        validate_challenge(challenge, "S256")


@pytest.mark.parametrize(
    "challenge",
    ["a" * 42, "a" * 129, "a" * 42 + "+", "a" * 42 + "=", "a" * 42 + " ", "a" * 43 + "\n", "é" * 43, "a" * 42 + "/"],
)
def test_bad_plain_challenge(challenge: str) -> None:
    with pytest.raises(PKCEError):
        validate_challenge(challenge, "plain")


@pytest.mark.parametrize("length", [43, 64, 128])
def test_plain_challenge_lengths(length: int) -> None:
    validate_challenge(("-._~" + UNRESERVED * 3)[:length], "plain")


@given(verifiers)
def test_every_valid_verifier_round_trips(verifier: str) -> None:
    challenge = s256_challenge(verifier)
    validate_challenge(challenge, "S256")
    assert verify(verifier, challenge, "S256")
    validate_challenge(verifier, "plain")
    assert verify(verifier, verifier, "plain")


@given(st.binary(min_size=32, max_size=32))
def test_every_digest_encoding_is_a_valid_s256_challenge(digest: bytes) -> None:
    validate_challenge(base64.urlsafe_b64encode(digest).rstrip(b"=").decode(), "S256")


# --- verify ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "verifier",
    ["a" * 42, "a" * 129, "a" * 42 + "+", "a" * 43 + "\n", "a" * 42 + " ", "", None, 123, b"a" * 43],
)
def test_verify_rejects_malformed_verifier(verifier: object) -> None:
    # Even a "matching" challenge cannot rescue a verifier outside the RFC grammar.
    challenge = verifier if isinstance(verifier, str) else "a" * 43
    assert not verify(verifier, challenge, "plain")
    if isinstance(verifier, str):
        digest = hashlib.sha256(verifier.encode()).digest()
        assert not verify(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode(), "S256")


@pytest.mark.parametrize("challenge", [None, "", 5, "é" * 43, "\ud800" * 43])
def test_verify_rejects_odd_challenge(challenge: object) -> None:
    assert not verify("a" * 43, challenge, "plain")
    assert not verify("a" * 43, challenge, "S256")


@pytest.mark.parametrize("method", ["s256", "bogus", 1, b"S256"])
def test_verify_rejects_unknown_method(method: object) -> None:
    assert not verify(APPENDIX_B_VERIFIER, APPENDIX_B_CHALLENGE, method)


_anything = st.one_of(st.none(), st.text(), st.binary(), st.integers(), verifiers)


@given(_anything, _anything, st.one_of(st.sampled_from(["S256", "plain", "", None]), _anything))
def test_verify_never_raises(verifier: object, challenge: object, method: object) -> None:
    assert verify(verifier, challenge, method) in (True, False)


@given(st.text(), st.one_of(st.none(), st.text(), st.sampled_from(["S256", "plain"])))
def test_validate_challenge_raises_only_pkce_error(challenge: str, method: str | None) -> None:
    with contextlib.suppress(PKCEError):
        validate_challenge(challenge, method)
