"""Webhook signing and verification (sans-IO).

Every delivery carries two independent signatures over the same raw body:

* ours: ``X-Service-Signature: sha256=<hex>`` where the MAC is
  ``HMAC-SHA256(key, f"{X-Service-Timestamp}." + raw_body)`` and the timestamp is
  epoch **milliseconds**;
* Standard Webhooks (standardwebhooks.com, v1 symmetric): ``webhook-signature: v1,<base64>``
  where the MAC is ``HMAC-SHA256(key, f"{webhook-id}.{webhook-timestamp}." + raw_body)``
  and the timestamp is epoch **seconds**.

Secrets and keys (one secret string, two key derivations):

* A signing secret is ``whsec_`` + base64 of 32 random bytes (:func:`generate_secret`),
  the serialisation the Standard Webhooks spec prescribes.
* Our scheme uses the secret string **exactly as shown to the owner**, UTF-8 encoded,
  as the HMAC key (``whsec_`` prefix included). The spec says "HMAC_SHA256(secret, ...)"
  with "the webhook's signing secret", so a receiver that follows the spec literally
  (``hmac.new(secret.encode(), ...)``, ``crypto.createHmac('sha256', secret)``) works.
* The Standard Webhooks scheme uses the base64-decoded bytes after ``whsec_``, which is
  what every Standard Webhooks library does with a ``whsec_`` secret, so receivers using
  those libraries work with the same string. A secret that is not valid base64 (after an
  optional ``whsec_``) falls back to its UTF-8 bytes, so any string can still sign.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets as _secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
DEFAULT_TOLERANCE = 300  # seconds: a receiver rejects timestamps more than 5 minutes off

# Header names as sent. Lookups on receipt are case-insensitive.
H_SIGNATURE = "X-Service-Signature"
H_TIMESTAMP = "X-Service-Timestamp"
H_EVENT = "X-Service-Event"
H_STD_ID = "webhook-id"
H_STD_TIMESTAMP = "webhook-timestamp"
H_STD_SIGNATURE = "webhook-signature"

_OUR_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")
# Timestamps are plain ASCII digits: no sign, no spaces, no "1e3"; int() alone would
# accept "+12", " 12" and "1_2", and a timestamp is part of the signed text.
_DIGITS = re.compile(r"[0-9]{1,16}")

HeaderSource = Mapping[str, str] | Mapping[bytes, bytes] | Iterable[tuple[Any, Any]]
SecretOrSecrets = str | Sequence[str]


class WebhookVerificationError(ValueError):
    """A delivery failed verification; the message says which check failed."""


# --------------------------------------------------------------------------- secrets


def generate_secret() -> str:
    """A new signing secret: ``whsec_`` + standard base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(_secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _our_key(secret: str) -> bytes:
    # The whole string, prefix included: what a spec-following receiver will use.
    return secret.encode("utf-8")


def _standard_key(secret: str) -> bytes:
    body = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return secret.encode("utf-8")


# --------------------------------------------------------------------------- signing


def _our_mac(secret: str, timestamp: str, raw_body: bytes) -> str:
    message = timestamp.encode("ascii") + b"." + raw_body
    return hmac.new(_our_key(secret), message, hashlib.sha256).hexdigest()


def _standard_mac(secret: str, msg_id: str, timestamp: str, raw_body: bytes) -> str:
    message = f"{msg_id}.{timestamp}.".encode() + raw_body
    digest = hmac.new(_standard_key(secret), message, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_delivery(secret: str, timestamp_ms: int, raw_body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, f"{timestamp_ms}." + raw_body)>``.

    The key is the secret string's UTF-8 bytes, ``whsec_`` prefix included.
    """
    return "sha256=" + _our_mac(secret, _timestamp_text(timestamp_ms), raw_body)


def standard_signature(secret: str, msg_id: str, timestamp_s: int, raw_body: bytes) -> str:
    """Standard Webhooks v1: ``v1,<base64 HMAC-SHA256(key, f"{id}.{ts}." + body)>``.

    The key is the base64-decoded part of a ``whsec_`` secret (see the module docstring).
    """
    _check_msg_id(msg_id)
    return "v1," + _standard_mac(secret, msg_id, _timestamp_text(timestamp_s), raw_body)


def _timestamp_text(value: int) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"timestamp must be a non-negative int, got {value!r}")
    return str(value)


def _check_msg_id(msg_id: str) -> None:
    # The Standard Webhooks spec: the id must not contain "." or the signed text
    # "{id}.{ts}.{body}" becomes ambiguous.
    if not msg_id or "." in msg_id:
        raise ValueError(f"message id must be non-empty and contain no '.': {msg_id!r}")


def encode_delivery_body(event_id: str, event_name: str, timestamp_iso: str, data: Mapping[str, Any]) -> bytes:
    """The exact bytes that are signed and sent: ``{id, event, type, timestamp, data}``.

    Both ``event`` and ``type`` carry the event name, so receivers written
    for either shape work.
    """
    envelope = {
        "id": event_id,
        "event": event_name,
        "type": event_name,
        "timestamp": timestamp_iso,
        "data": data,
    }
    return orjson.dumps(envelope)


def delivery_headers(secret: str, event_id: str, event_name: str, timestamp_ms: int, raw_body: bytes) -> dict[str, str]:
    """All headers of one delivery attempt, both signature schemes included.

    ``timestamp_ms`` is the attempt time (a retry gets a fresh one and a fresh
    signature); the Standard Webhooks timestamp is the same instant in whole seconds,
    and ``webhook-id`` is the event id, stable across retries (the receiver's dedupe key).
    """
    _timestamp_text(timestamp_ms)  # validates before any arithmetic
    timestamp_s = timestamp_ms // 1000
    return {
        "Content-Type": "application/json",
        H_SIGNATURE: sign_delivery(secret, timestamp_ms, raw_body),
        H_TIMESTAMP: str(timestamp_ms),
        H_EVENT: event_name,
        H_STD_ID: event_id,
        H_STD_TIMESTAMP: str(timestamp_s),
        H_STD_SIGNATURE: standard_signature(secret, event_id, timestamp_s, raw_body),
    }


# --------------------------------------------------------------------------- headers


def normalize_headers(headers: HeaderSource) -> dict[str, str]:
    """Lower-cased name → value from a mapping, a multi-dict or ASGI-style byte pairs.

    A name given twice keeps its first value: a second signature header must not be
    able to replace the first one unnoticed.
    """
    pairs = headers.items() if hasattr(headers, "items") else headers
    result: dict[str, str] = {}
    for name, value in pairs:
        key = _text(name).lower()
        result.setdefault(key, _text(value))
    return result


def _text(value: str | bytes) -> str:
    # Header bytes are latin-1 by HTTP's rules; never fails.
    return value.decode("latin-1") if isinstance(value, bytes | bytearray) else str(value)


# --------------------------------------------------------------------------- verify


def verify(
    secret: SecretOrSecrets,
    headers: HeaderSource,
    raw_body: bytes | str,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> dict[str, Any]:
    """Verify one received delivery and return its parsed JSON body.

    For receivers. ``secret`` is the webhook's signing secret, or a list of them while a
    secret is being rotated (any one may match). ``headers`` is any mapping, looked up
    case-insensitively. With ``X-Service-Signature`` present our scheme is checked
    (timestamp in ms, ±``tolerance`` seconds compared in milliseconds); otherwise the
    Standard Webhooks headers are (timestamp in seconds). ``now`` is epoch seconds
    (defaults to the system clock). Hash the body exactly as received: never re-encode.

    ``X-Service-Event`` is not covered by the signature; trust the body's
    ``event``/``type`` instead. Raises :class:`WebhookVerificationError`.
    """
    keys = _secret_list(secret)
    found = normalize_headers(headers)
    body = raw_body.encode("utf-8") if isinstance(raw_body, str) else bytes(raw_body)
    current = time.time() if now is None else now
    if H_SIGNATURE.lower() in found:
        _verify_ours(keys, found, body, tolerance, current)
    elif H_STD_SIGNATURE in found:
        _verify_standard(keys, found, body, tolerance, current)
    else:
        raise WebhookVerificationError(f"missing header: neither {H_SIGNATURE} nor {H_STD_SIGNATURE} is present")
    return _parse_body(body)


def _secret_list(secret: SecretOrSecrets) -> list[str]:
    keys = [secret] if isinstance(secret, str) else list(secret)
    if not keys or not all(isinstance(k, str) and k for k in keys):
        raise ValueError("verify() needs a non-empty secret or a non-empty list of them")
    return keys


def _require(found: Mapping[str, str], name: str) -> str:
    value = found.get(name.lower())
    if value is None:
        raise WebhookVerificationError(f"missing header: {name}")
    return value.strip()


def _parse_timestamp(value: str, name: str) -> int:
    if not _DIGITS.fullmatch(value):
        raise WebhookVerificationError(f"bad timestamp format in {name}: {value!r}")
    return int(value)


def _check_age(sent: int, current: int, tolerance: int, unit: str) -> None:
    # Both directions: an old timestamp is a replay, a future one a replay prepared
    # in advance (or a broken clock).
    if current - sent > tolerance:
        raise WebhookVerificationError(
            f"timestamp too old: {current - sent} {unit} before now, tolerance {tolerance} {unit}"
        )
    if sent - current > tolerance:
        raise WebhookVerificationError(
            f"timestamp too new: {sent - current} {unit} after now, tolerance {tolerance} {unit}"
        )


def _verify_ours(keys: list[str], found: Mapping[str, str], body: bytes, tolerance: float, now: float) -> None:
    signature = _require(found, H_SIGNATURE)
    ts_text = _require(found, H_TIMESTAMP)
    match = _OUR_SIGNATURE.fullmatch(signature)
    if match is None:
        raise WebhookVerificationError(f"bad signature format in {H_SIGNATURE}: expected 'sha256=' and 64 hex digits")
    sent_ms = _parse_timestamp(ts_text, H_TIMESTAMP)
    # The tolerance is compared in milliseconds.
    _check_age(sent_ms, round(now * 1000), round(tolerance * 1000), "ms")
    given = match.group(1).lower().encode("ascii")
    if not _any_match(given, (_our_mac(k, ts_text, body).encode("ascii") for k in keys)):
        raise WebhookVerificationError(f"signature mismatch in {H_SIGNATURE}")


def _verify_standard(keys: list[str], found: Mapping[str, str], body: bytes, tolerance: float, now: float) -> None:
    msg_id = _require(found, H_STD_ID)
    ts_text = _require(found, H_STD_TIMESTAMP)
    candidates = _standard_candidates(_require(found, H_STD_SIGNATURE))
    if not msg_id or "." in msg_id:
        raise WebhookVerificationError(f"bad {H_STD_ID}: must be non-empty without '.'")
    sent_s = _parse_timestamp(ts_text, H_STD_TIMESTAMP)
    _check_age(sent_s, int(now), int(tolerance), "s")
    expected = [_standard_mac(k, msg_id, ts_text, body).encode("ascii") for k in keys]
    if not any(_any_match(c, expected) for c in candidates):
        raise WebhookVerificationError(f"signature mismatch in {H_STD_SIGNATURE}")


def _standard_candidates(header: str) -> list[bytes]:
    """The v1 signatures of a space-delimited ``webhook-signature`` list.

    Other versions (``v1a`` asymmetric, future ones) are skipped, as the spec's
    forward-compatibility asks; a header with no v1 entry at all is a format error.
    """
    found = []
    for entry in header.split():
        version, sep, value = entry.partition(",")
        if sep and version == "v1" and value:
            found.append(value.encode("utf-8", "replace"))
    if not found:
        raise WebhookVerificationError(f"bad signature format in {H_STD_SIGNATURE}: no 'v1,<base64>' entry")
    return found


def _any_match(given: bytes, expected: Iterable[bytes]) -> bool:
    # Constant-time per comparison, and every candidate is compared (no early exit on
    # the first match) so timing does not reveal which secret matched.
    matched = False
    for candidate in expected:
        matched |= hmac.compare_digest(given, candidate)
    return matched


def _parse_body(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise WebhookVerificationError(f"body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise WebhookVerificationError("body is not a JSON object")
    return parsed
