"""Signing and verification: known answers computed independently, and each failure."""

from __future__ import annotations

import base64
import hashlib
import hmac

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from volthub.protocol.webhooks import (
    WebhookVerificationError,
    delivery_headers,
    encode_delivery_body,
    generate_secret,
    sign_delivery,
    standard_signature,
    verify,
)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_" + base64.b64encode(b"\x01" * 32).decode()
EVENT_ID = "evt_01HZY3"
TS_MS = 1_700_000_000_123
NOW = TS_MS / 1000  # the receiver's clock, epoch seconds
BODY = b'{"id":"evt_01HZY3","event":"stream.online","data":{"x":1}}'


def hex_hmac(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def b64_hmac(key: bytes, message: bytes) -> str:
    return base64.b64encode(hmac.new(key, message, hashlib.sha256).digest()).decode()


def std_key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix("whsec_"))


def ours(secret: str = SECRET, ts_ms: int = TS_MS, body: bytes = BODY) -> dict[str, str]:
    return {
        "X-Service-Signature": sign_delivery(secret, ts_ms, body),
        "X-Service-Timestamp": str(ts_ms),
        "X-Service-Event": "stream.online",
    }


def standard(secret: str = SECRET, ts_s: int = TS_MS // 1000, body: bytes = BODY) -> dict[str, str]:
    return {
        "webhook-id": EVENT_ID,
        "webhook-timestamp": str(ts_s),
        "webhook-signature": standard_signature(secret, EVENT_ID, ts_s, body),
    }


# --------------------------------------------------------------------------- known answers


def test_our_signature_known_answer() -> None:
    # HMAC_SHA256(secret, timestamp + "." + rawBody), hex, "sha256=" prefix;
    # the key is the secret string as shown, prefix included.
    expected = hex_hmac(SECRET.encode(), f"{TS_MS}.".encode() + BODY)
    assert sign_delivery(SECRET, TS_MS, BODY) == "sha256=" + expected


def test_our_signature_fixed_vector() -> None:
    # Pinned so a change of key derivation cannot slip through unnoticed.
    value = sign_delivery("whsec_test", 1, b"{}")
    assert value == "sha256=" + hex_hmac(b"whsec_test", b"1.{}")
    assert len(value) == len("sha256=") + 64


def test_standard_signature_public_vector() -> None:
    # The Standard Webhooks reference libraries' published test vector.
    sig = standard_signature(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        b'{"test": 2432232314}',
    )
    assert sig == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_standard_signature_known_answer() -> None:
    expected = b64_hmac(std_key(SECRET), f"{EVENT_ID}.1700000000.".encode() + BODY)
    assert standard_signature(SECRET, EVENT_ID, 1_700_000_000, BODY) == "v1," + expected


def test_standard_secret_without_prefix_is_base64_decoded() -> None:
    bare = SECRET.removeprefix("whsec_")
    assert standard_signature(bare, "m", 5, b"x") == standard_signature(SECRET, "m", 5, b"x")


def test_standard_secret_not_base64_falls_back_to_utf8() -> None:
    expected = "v1," + b64_hmac(b"not base64!", b"m.5.x")
    assert standard_signature("not base64!", "m", 5, b"x") == expected


def test_standard_signature_refuses_dotted_id() -> None:
    with pytest.raises(ValueError):
        standard_signature(SECRET, "a.b", 5, b"x")


@pytest.mark.parametrize("bad", [-1, 1.5, True, "12"])
def test_sign_refuses_bad_timestamps(bad: object) -> None:
    with pytest.raises(ValueError):
        sign_delivery(SECRET, bad, BODY)  # type: ignore[arg-type]


def test_generate_secret_format() -> None:
    secret = generate_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret[6:], validate=True)) == 32
    assert generate_secret() != secret


# --------------------------------------------------------------------------- delivery


def test_encode_delivery_body_shape() -> None:
    raw = encode_delivery_body("e1", "stream.online", "2026-01-01T00:00:00.000Z", {"a": "é"})
    assert isinstance(raw, bytes)
    assert orjson.loads(raw) == {
        "id": "e1",
        "event": "stream.online",
        "type": "stream.online",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "data": {"a": "é"},
    }
    assert list(orjson.loads(raw)) == ["id", "event", "type", "timestamp", "data"]


def test_delivery_headers_are_complete_and_consistent() -> None:
    headers = delivery_headers(SECRET, EVENT_ID, "stream.online", TS_MS, BODY)
    assert headers == {
        "Content-Type": "application/json",
        "X-Service-Signature": "sha256=" + hex_hmac(SECRET.encode(), f"{TS_MS}.".encode() + BODY),
        "X-Service-Timestamp": "1700000000123",
        "X-Service-Event": "stream.online",
        "webhook-id": EVENT_ID,
        "webhook-timestamp": "1700000000",
        "webhook-signature": "v1," + b64_hmac(std_key(SECRET), f"{EVENT_ID}.1700000000.".encode() + BODY),
    }


def test_delivery_verifies_with_both_schemes() -> None:
    body = encode_delivery_body(EVENT_ID, "chat.message", "2026-01-01T00:00:00Z", {"m": 1})
    headers = delivery_headers(SECRET, EVENT_ID, "chat.message", TS_MS, body)
    assert verify(SECRET, headers, body, now=NOW)["data"] == {"m": 1}
    std_only = {k: v for k, v in headers.items() if k.startswith("webhook-")}
    assert verify(SECRET, std_only, body, now=NOW)["event"] == "chat.message"


# --------------------------------------------------------------------------- verify: success


def test_verify_returns_body() -> None:
    assert verify(SECRET, ours(), BODY, now=NOW) == orjson.loads(BODY)


def test_verify_accepts_str_body() -> None:
    assert verify(SECRET, ours(), BODY.decode(), now=NOW)["id"] == EVENT_ID


@pytest.mark.parametrize("transform", [str.lower, str.upper, str.title])
def test_verify_header_names_are_case_insensitive(transform) -> None:
    headers = {transform(k): v for k, v in ours().items()}
    assert verify(SECRET, headers, BODY, now=NOW)["id"] == EVENT_ID
    headers = {transform(k): v for k, v in standard().items()}
    assert verify(SECRET, headers, BODY, now=NOW)["id"] == EVENT_ID


def test_verify_accepts_byte_pairs() -> None:
    # ASGI scopes give headers as a list of (bytes, bytes).
    pairs = [(k.lower().encode(), v.encode()) for k, v in ours().items()]
    assert verify(SECRET, pairs, BODY, now=NOW)["id"] == EVENT_ID


def test_verify_uppercase_hex_signature() -> None:
    headers = ours()
    headers["X-Service-Signature"] = "sha256=" + headers["X-Service-Signature"][7:].upper()
    assert verify(SECRET, headers, BODY, now=NOW)


def test_verify_secret_list_for_rotation() -> None:
    for secrets in ([OTHER_SECRET, SECRET], [SECRET, OTHER_SECRET], (SECRET,)):
        assert verify(secrets, ours(), BODY, now=NOW)
        assert verify(secrets, standard(), BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="mismatch"):
        verify([OTHER_SECRET], ours(), BODY, now=NOW)


@pytest.mark.parametrize("secrets", [[], "", [""]])
def test_verify_needs_a_secret(secrets) -> None:
    with pytest.raises(ValueError):
        verify(secrets, ours(), BODY, now=NOW)


def test_verify_standard_multiple_signatures() -> None:
    headers = standard()
    good = headers["webhook-signature"]
    headers["webhook-signature"] = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1a,AAAA v2,xyz " + good
    assert verify(SECRET, headers, BODY, now=NOW)


def test_verify_standard_public_vector() -> None:
    headers = {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }
    body = b'{"test": 2432232314}'
    assert verify(SECRET, headers, body, now=1614265330) == {"test": 2432232314}


def test_our_headers_take_precedence() -> None:
    # Both present: ours is checked, so a broken Standard signature is not consulted...
    headers = {**standard(), **ours(), "webhook-signature": "v1,AAAA"}
    assert verify(SECRET, headers, BODY, now=NOW)
    # ...and a broken one of ours is not rescued by a valid Standard signature.
    headers = {**standard(), **ours(), "X-Service-Signature": "sha256=" + "0" * 64}
    with pytest.raises(WebhookVerificationError, match="mismatch"):
        verify(SECRET, headers, BODY, now=NOW)


# --------------------------------------------------------------------------- verify: failures


def test_missing_all_headers() -> None:
    with pytest.raises(WebhookVerificationError, match="missing header"):
        verify(SECRET, {}, BODY, now=NOW)


@pytest.mark.parametrize("name", ["X-Service-Timestamp"])
def test_missing_our_timestamp(name: str) -> None:
    headers = ours()
    del headers[name]
    with pytest.raises(WebhookVerificationError, match=f"missing header: {name}"):
        verify(SECRET, headers, BODY, now=NOW)


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp"])
def test_missing_standard_header(name: str) -> None:
    headers = standard()
    del headers[name]
    with pytest.raises(WebhookVerificationError, match=f"missing header: {name}"):
        verify(SECRET, headers, BODY, now=NOW)


@pytest.mark.parametrize(
    "value",
    ["", "sha256=", "sha256=xyz", "sha1=" + "0" * 40, "0" * 64, "sha256=" + "0" * 63, "v1,abc"],
)
def test_bad_our_signature_format(value: str) -> None:
    headers = {**ours(), "X-Service-Signature": value}
    with pytest.raises(WebhookVerificationError, match="bad signature format"):
        verify(SECRET, headers, BODY, now=NOW)


@pytest.mark.parametrize("value", ["", "v1", "v1,", "v1a,abcd", "sha256=abc", "v2,abc"])
def test_bad_standard_signature_format(value: str) -> None:
    headers = {**standard(), "webhook-signature": value}
    with pytest.raises(WebhookVerificationError, match="bad signature format"):
        verify(SECRET, headers, BODY, now=NOW)


@pytest.mark.parametrize("value", ["abc", "-5", "+1700000000123", "1.7e12", " ", "1_700"])
def test_bad_timestamp_format(value: str) -> None:
    with pytest.raises(WebhookVerificationError, match="bad timestamp format"):
        verify(SECRET, {**ours(), "X-Service-Timestamp": value}, BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="bad timestamp format"):
        verify(SECRET, {**standard(), "webhook-timestamp": value}, BODY, now=NOW)


def test_standard_dotted_id_is_refused() -> None:
    headers = {**standard(), "webhook-id": "a.b"}
    with pytest.raises(WebhookVerificationError, match="webhook-id"):
        verify(SECRET, headers, BODY, now=NOW)


def test_tampered_body() -> None:
    tampered = BODY.replace(b'"x":1', b'"x":2')
    with pytest.raises(WebhookVerificationError, match="signature mismatch"):
        verify(SECRET, ours(), tampered, now=NOW)
    with pytest.raises(WebhookVerificationError, match="signature mismatch"):
        verify(SECRET, standard(), tampered, now=NOW)


def test_tampered_timestamp_within_tolerance() -> None:
    headers = {**ours(), "X-Service-Timestamp": str(TS_MS + 1)}
    with pytest.raises(WebhookVerificationError, match="signature mismatch"):
        verify(SECRET, headers, BODY, now=NOW)


def test_reencoded_body_fails() -> None:
    # A receiver that parses and re-serialises the body breaks the signature.
    reencoded = orjson.dumps(orjson.loads(BODY), option=orjson.OPT_INDENT_2)
    with pytest.raises(WebhookVerificationError, match="signature mismatch"):
        verify(SECRET, ours(), reencoded, now=NOW)


def test_wrong_secret() -> None:
    with pytest.raises(WebhookVerificationError, match="signature mismatch"):
        verify(OTHER_SECRET, ours(), BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="signature mismatch"):
        verify(OTHER_SECRET, standard(), BODY, now=NOW)


@pytest.mark.parametrize("body", [b"not json", b"", b"{", b"\xff\xfe"])
def test_body_not_json(body: bytes) -> None:
    with pytest.raises(WebhookVerificationError, match="body is not JSON"):
        verify(SECRET, ours(body=body), body, now=NOW)


@pytest.mark.parametrize("body", [b"[1,2]", b"42", b'"s"', b"null"])
def test_body_not_object(body: bytes) -> None:
    with pytest.raises(WebhookVerificationError, match="not a JSON object"):
        verify(SECRET, ours(body=body), body, now=NOW)


def test_error_is_value_error() -> None:
    assert issubclass(WebhookVerificationError, ValueError)


# --------------------------------------------------------------------------- tolerance


@pytest.mark.parametrize("delta_ms", [0, 1, 299_999, 300_000, -1, -300_000])
def test_our_tolerance_inside_ms(delta_ms: int) -> None:
    # delta = now - sent; exactly 5 minutes either way is still accepted.
    now = (TS_MS + delta_ms) / 1000
    assert verify(SECRET, ours(), BODY, now=now)


def test_our_tolerance_too_old_by_one_ms() -> None:
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify(SECRET, ours(), BODY, now=(TS_MS + 300_001) / 1000)


def test_our_tolerance_too_new_by_one_ms() -> None:
    with pytest.raises(WebhookVerificationError, match="too new"):
        verify(SECRET, ours(), BODY, now=(TS_MS - 300_001) / 1000)


def test_custom_tolerance_ms() -> None:
    assert verify(SECRET, ours(), BODY, tolerance=0.5, now=(TS_MS + 500) / 1000)
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify(SECRET, ours(), BODY, tolerance=0.5, now=(TS_MS + 501) / 1000)


def test_expired_signature_reports_age_not_mismatch() -> None:
    # A stale replay is reported as such even with a wrong secret: the clock check
    # comes first, before any HMAC is computed.
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify(OTHER_SECRET, ours(), BODY, now=NOW + 3600)


@pytest.mark.parametrize("delta_s, ok", [(300, True), (301, False), (-300, True), (-301, False)])
def test_standard_tolerance_seconds(delta_s: int, ok: bool) -> None:
    ts = 1_700_000_000
    now = ts + delta_s
    if ok:
        assert verify(SECRET, standard(ts_s=ts), BODY, now=now)
    else:
        with pytest.raises(WebhookVerificationError, match="too (old|new)"):
            verify(SECRET, standard(ts_s=ts), BODY, now=now)


def test_default_now_is_system_clock() -> None:
    import time

    ts_ms = int(time.time() * 1000)
    assert verify(SECRET, ours(ts_ms=ts_ms), BODY)
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify(SECRET, ours(ts_ms=ts_ms - 3_600_000), BODY)


# --------------------------------------------------------------------------- properties

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(
    data=st.dictionaries(st.text(max_size=10), json_values, max_size=5),
    ts_ms=st.integers(0, 4_102_444_800_000),
    event_id=st.from_regex(r"[A-Za-z0-9_-]{1,30}", fullmatch=True),
)
def test_roundtrip_both_schemes(data: dict, ts_ms: int, event_id: str) -> None:
    secret = generate_secret()
    body = encode_delivery_body(event_id, "channel.follow", "2026-01-01T00:00:00Z", data)
    headers = delivery_headers(secret, event_id, "channel.follow", ts_ms, body)
    now = ts_ms / 1000
    assert verify(secret, headers, body, now=now)["data"] == data
    std_only = {k: v for k, v in headers.items() if k.startswith("webhook-")}
    assert verify(secret, std_only, body, now=ts_ms // 1000)["id"] == event_id


@settings(max_examples=60, deadline=None)
@given(body=st.binary(min_size=1, max_size=200), index=st.integers(0, 199), flip=st.integers(1, 255))
def test_any_body_change_breaks_signature(body: bytes, index: int, flip: int) -> None:
    index %= len(body)
    changed = body[:index] + bytes([body[index] ^ flip]) + body[index + 1 :]
    headers = ours(body=body)
    with pytest.raises(WebhookVerificationError, match="mismatch"):
        verify(SECRET, headers, changed, now=NOW)
