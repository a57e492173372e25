"""Server-Sent Events framing (sans-IO), per the WHATWG HTML "server-sent events" format,
for both ends: :func:`encode` writes what a server sends, :class:`EventStreamParser` reads it
back as a client does.

An event is ``event:``/``id:``/``data:`` lines closed by a blank line; a line starting with
``:`` is a comment (used as keep-alive). Data with line breaks becomes several ``data:``
lines, which the client joins back with ``\\n``. Names and ids may not contain line breaks
(they would end the field early), and an id may not contain NUL (clients ignore it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")
_LINE_BREAK_BYTES: Final = re.compile(rb"\r\n|\r|\n")
KEEP_ALIVE: Final = b": keep-alive\n\n"
# Longest Last-Event-ID we look at; event ids are UUIDs (36 characters).
MAX_EVENT_ID: Final = 128


def encode(data: str | bytes, *, event: str | None = None, id: str | None = None, retry_ms: int | None = None) -> bytes:
    """One event as bytes, ready to write."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    lines: list[str] = []
    if event is not None:
        _check_field("event", event)
        lines.append(f"event: {event}")
    if id is not None:
        _check_field("id", id)
        if "\0" in id:
            raise ValueError("an event id must not contain NUL")
        lines.append(f"id: {id}")
    if retry_ms is not None:
        if isinstance(retry_ms, bool) or not isinstance(retry_ms, int) or retry_ms < 0:
            raise ValueError("retry must be a non-negative integer")
        lines.append(f"retry: {retry_ms}")
    lines.extend(f"data: {line}" for line in _LINE_BREAK.split(data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def comment(text: str = "") -> bytes:
    """A comment block (ignored by clients): keeps idle connections open through proxies."""
    return "".join(f": {line}\n" for line in _LINE_BREAK.split(text)).encode("utf-8") + b"\n"


def last_event_id(header: str | None) -> str | None:
    """The usable Last-Event-ID of a request, or None (missing, empty or absurd)."""
    if header is None:
        return None
    value = header.strip()
    if not value or len(value) > MAX_EVENT_ID or _LINE_BREAK.search(value) or "\0" in value:
        return None
    return value


def _check_field(name: str, value: str) -> None:
    if not isinstance(value, str) or _LINE_BREAK.search(value):
        raise ValueError(f"an SSE {name} must be a string without line breaks")


@dataclass(frozen=True, slots=True)
class ReceivedEvent:
    """One event as a client dispatches it: its type ("message" when unnamed), its data
    lines joined with ``\\n``, and the last event id seen so far (None before any)."""

    event: str
    data: str
    id: str | None


class EventStreamParser:
    """The client's side: bytes of a ``text/event-stream`` in, whole events out. Comments
    (keep-alives) are skipped, a block without data dispatches nothing, and the id carries
    over to later events as a browser's ``lastEventId`` does."""

    __slots__ = ("_pending", "_event", "_data", "_id")

    def __init__(self) -> None:
        self._pending = b""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[ReceivedEvent]:
        events: list[ReceivedEvent] = []
        data = self._pending + chunk
        # A CR at the end may be the first half of a CRLF: it waits for the next chunk.
        held_back = b"\r" if data.endswith(b"\r") else b""
        lines = _LINE_BREAK_BYTES.split(data[: len(data) - len(held_back)])
        self._pending = lines.pop() + held_back
        for line in lines:
            if not line:
                if self._data:
                    events.append(ReceivedEvent(self._event or "message", "\n".join(self._data), self._id))
                self._event, self._data = "", []
            elif not line.startswith(b":"):
                self._field(line.decode("utf-8", "replace"))
        return events

    def _field(self, line: str) -> None:
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
