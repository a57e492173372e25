"""Every event payload the tests receive is held to its schema in the AsyncAPI document.

Loaded as a pytest plugin (tests/conftest.py). The schemas are the document's own
(:mod:`volthub.protocol.event_schemas`, derived from the catalogue); the checks run where
events reach the tests: every SSE stream read through httpx-sse (`aiter_sse`), every
Socket.IO frame read with `tests.http.events.live.receive`, and every delivery the HTTPS
webhook receiver (tests/services/webhooks/support.py) gets, headers included. A mismatch
read by a test's own code fails it at once; one seen by the receiver, which runs as a
server, fails the test at its teardown.

Events the catalogue does not know (bus tests publish made-up names) are not checked here,
and tests of delivery that need some payload of a real event publish `stand_in(name)`:
tests/protocol/test_event_schemas.py holds every catalogue event to a schema.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from volthub.protocol import catalogue, event_schemas, trigger

# How many payloads were checked in this process, by where they were seen.
CHECKED: Counter[str] = Counter()
# Mismatches seen inside servers (in-process apps, the webhook receiver) during the current
# test: its teardown fails on them.
_NOTED: list[str] = []


class PayloadMismatch(AssertionError):
    """An event payload that its schema does not accept."""


@functools.cache
def _data_schema(name: str) -> dict[str, Any]:
    return event_schemas.data_schema(catalogue.BY_NAME[name])


@functools.cache
def _envelope_validator(name: str) -> Draft202012Validator:
    entry = catalogue.BY_NAME[name]
    return Draft202012Validator(event_schemas.envelope_schema(entry, _data_schema(name)))


@functools.cache
def _delivery_validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(event_schemas.delivery_schema(name, _data_schema(name)))


@functools.cache
def _data_validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(_data_schema(name))


_HEADERS = Draft202012Validator(event_schemas.delivery_headers_schema())


def _check(validator: Draft202012Validator, value: Any, what: str, seen_at: str) -> None:
    errors = sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))
    if errors:
        details = "; ".join(
            f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in errors
        )
        raise PayloadMismatch(f"{what} does not match its schema: {details}\n{value!r}")
    CHECKED[seen_at] += 1


_STAND_IN_CHANNEL = trigger.Channel("0f5e8d7c-2b1a-4c3d-9e8f-7a6b5c4d3e2f", "stand_in", "Stand-in")


def stand_in(name: str, **fields: Any) -> dict[str, Any]:
    """A valid `data` of the event with `fields` set (documented fields only): what a test of
    delivery (framing, fan-out, resume, retries) publishes when any payload of a real event
    will do, so the payloads it receives still match their schema."""
    is_test = fields.pop("isTest", False)
    data = trigger.sample(catalogue.BY_NAME[name], _STAND_IN_CHANNEL, "2026-11-22T13:07:00.000Z", fields)
    if not is_test:
        data.pop("isTest")
    return data


def known(name: Any) -> bool:
    return isinstance(name, str) and name in catalogue.BY_NAME


def check_envelope(envelope: Any, seen_at: str) -> None:
    """An Events API envelope {event, timestamp, data} of a catalogue event."""
    if isinstance(envelope, dict) and known(envelope.get("event")):
        _check(_envelope_validator(envelope["event"]), envelope, f"the envelope of {envelope['event']}", seen_at)


def check_data(name: str, data: Any, seen_at: str) -> None:
    """The `data` of a catalogue event, as Socket.IO emits it under the event's name."""
    if known(name):
        _check(_data_validator(name), data, f"the data of {name}", seen_at)


def check_delivery(headers: Mapping[str, str], body: bytes) -> None:
    """A webhook delivery: its headers, and its body {id, event, type, timestamp, data}."""
    by_lower = {name.lower(): value for name, value in headers.items()}
    if "x-service-event" not in by_lower:
        return  # not a delivery (a test's own request to the receiver)
    named = {name: by_lower[name.lower()] for name in _HEADERS.schema["properties"] if name.lower() in by_lower}
    _check(_HEADERS, named, "the webhook headers", "webhook headers")
    try:
        delivery = orjson.loads(body)
    except orjson.JSONDecodeError:
        return
    name = delivery.get("event") if isinstance(delivery, dict) else None
    if known(name):
        _check(_delivery_validator(name), delivery, f"the webhook delivery of {name}", "webhooks")


def note_delivery(headers: Mapping[str, str], body: bytes) -> None:
    """`check_delivery` for the receiver, which runs as a server: a mismatch fails the test
    at its teardown."""
    try:
        check_delivery(headers, body)
    except PayloadMismatch as mismatch:
        _NOTED.append(str(mismatch))


def check_socketio_frame(frame: str | bytes) -> None:
    """A raw Engine.IO message: a Socket.IO EVENT packet (`42[/ns,][id]["name", payload]`)."""
    if not isinstance(frame, str) or not frame.startswith("42"):
        return
    packet = frame[2:]
    if packet.startswith("/"):
        packet = packet.partition(",")[2]
    packet = packet.lstrip("0123456789")  # an ack id
    try:
        name, *args = orjson.loads(packet)
    except (orjson.JSONDecodeError, ValueError, TypeError):
        return
    if not args:
        return
    if name == "event":
        check_envelope(args[0], "socket.io")
    else:
        check_data(name, args[0], "socket.io")


def check_sse(event: str, data: str) -> None:
    """One SSE message: a platform event's envelope, named after it or unnamed."""
    if event in ("connected", "error", "shutdown"):
        return
    try:
        envelope = orjson.loads(data)
    except orjson.JSONDecodeError:
        return
    if isinstance(envelope, dict) and known(envelope.get("event")):
        if event not in ("message", envelope["event"]):
            raise PayloadMismatch(f"an SSE message named {event!r} carries {envelope['event']}")
        check_envelope(envelope, "sse")


@pytest.fixture(autouse=True)
def _events_match_their_schemas(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from httpx_sse import EventSource

    _NOTED.clear()
    read = EventSource.aiter_sse

    async def checked_sse(source: EventSource) -> AsyncGenerator[Any, None]:
        events = read(source)
        try:
            async for sse in events:
                check_sse(sse.event, sse.data)
                yield sse
        finally:
            await events.aclose()

    monkeypatch.setattr(EventSource, "aiter_sse", checked_sse)
    yield
    noted, _NOTED[:] = list(_NOTED), []
    assert not noted, "event payloads that do not match their schemas:\n" + "\n".join(noted)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if CHECKED:
        counts = ", ".join(f"{where}: {count}" for where, count in sorted(CHECKED.items()))
        terminalreporter.write_line(f"event payloads checked against their AsyncAPI schemas: {counts}")
