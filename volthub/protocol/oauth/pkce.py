"""PKCE (RFC 7636) checks for the authorize and token endpoints (sans-IO).

Authorize: ``validate_challenge`` refuses a malformed ``code_challenge`` up front, so a
code is never issued against a challenge no verifier could ever satisfy.
Token: ``verify`` compares the ``code_verifier`` with the stored challenge in constant
time and never raises — any malformed input is simply a failed verification.

Empty strings count as absent: RFC 6749 §3.1 says parameters sent without a value are
treated as omitted, and HTML forms send empty fields.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

__all__ = [
    "METHODS",
    "PKCEError",
    "effective_method",
    "s256_challenge",
    "validate_challenge",
    "verify",
]

METHODS: frozenset[str] = frozenset({"S256", "plain"})

# RFC 7636 §4.1: code-verifier = 43*128unreserved; a "plain" challenge is the verifier
# itself, so it has the same grammar. fullmatch, because "$" would accept a trailing "\n".
_UNRESERVED = re.compile(r"[A-Za-z0-9\-._~]{43,128}")
# An S256 challenge is base64url (no padding) of a 32-byte SHA-256 digest: 43 characters.
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")


class PKCEError(ValueError):
    """A PKCE parameter is malformed or unsupported (RFC 6749 ``invalid_request``)."""

    error = "invalid_request"


def effective_method(method: str | None) -> str:
    """The method in force: RFC 7636 §4.3 defaults to ``plain`` when none is sent."""
    return method or "plain"


def s256_challenge(verifier: str) -> str:
    """BASE64URL(SHA256(ASCII(verifier))) without padding (RFC 7636 §4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _is_canonical_s256(challenge: str) -> bool:
    # 43 base64url characters carry 258 bits; the last character's 2 spare bits must be
    # zero, or the string is not what encoding any digest produces and can never match.
    if not _S256_CHALLENGE.fullmatch(challenge):
        return False
    try:
        raw = base64.urlsafe_b64decode(challenge + "=")
    except (binascii.Error, ValueError):
        return False
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") == challenge


def validate_challenge(challenge: str | None, method: str | None) -> None:
    """Check the authorize request's PKCE parameters; raise ``PKCEError`` if unusable.

    No challenge and no method means the client does not use PKCE, which is allowed here;
    whether PKCE is mandatory for a client is the endpoint's policy, not this module's.
    """
    if not challenge:
        if method:
            raise PKCEError("code_challenge_method was sent without code_challenge")
        return
    method = effective_method(method)
    if method not in METHODS:
        raise PKCEError("code_challenge_method must be S256 or plain")
    if method == "S256" and not _is_canonical_s256(challenge):
        raise PKCEError("an S256 code_challenge is 43 base64url characters (a SHA-256 digest, no padding)")
    if method == "plain" and not _UNRESERVED.fullmatch(challenge):
        raise PKCEError("a plain code_challenge is 43-128 characters of A-Z a-z 0-9 - . _ ~")


def verify(verifier: object, challenge: object, method: object) -> bool:
    """Whether ``verifier`` satisfies the stored ``challenge``; constant-time, never raises.

    Typed ``object`` on purpose: the verifier comes straight from a request body.
    Early returns depend only on the verifier's shape and the method, never on how much
    of the secret comparison matched.
    """
    if not isinstance(verifier, str) or not _UNRESERVED.fullmatch(verifier):
        return False
    if not isinstance(challenge, str) or not challenge:
        return False
    if method is not None and not isinstance(method, str):
        return False
    method = effective_method(method)
    if method == "S256":
        expected = s256_challenge(verifier)
    elif method == "plain":
        expected = verifier
    else:
        return False
    # Encode both sides: compare_digest on str refuses non-ASCII, and the stored
    # challenge is not ours to trust.
    return hmac.compare_digest(expected.encode("ascii"), challenge.encode("utf-8", "surrogatepass"))
