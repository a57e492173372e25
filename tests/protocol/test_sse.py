"""SSE framing (volthub.protocol.sse), checked against httpx-sse's parser."""

from __future__ import annotations

import pytest
from httpx_sse._decoders import SSEDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

from volthub.protocol import sse


def parse(raw: bytes) -> list[tuple[str, str, str]]:
    """Events of a stream, as a client reads them (each block ends with a blank line)."""
    found = []
    for block in raw.decode("utf-8").split("\n\n")[:-1]:
        decoder = SSEDecoder()
        for line in [*block.split("\n"), ""]:
            event = decoder.decode(line)
            if event is not None:
                found.append((event.event, event.data, event.id))
    return found


def test_named_event_with_id() -> None:
    frame = sse.encode(b'{"event":"chat.message"}', event="chat.message", id="abc")
    assert frame == b'event: chat.message\nid: abc\ndata: {"event":"chat.message"}\n\n'
    assert parse(frame) == [("chat.message", '{"event":"chat.message"}', "abc")]


def test_multi_line_data_becomes_several_data_lines() -> None:
    frame = sse.encode("one\ntwo\r\nthree")
    assert frame == b"data: one\ndata: two\ndata: three\n\n"
    assert parse(frame)[0][1] == "one\ntwo\nthree"


def test_retry_field() -> None:
    assert sse.encode("x", retry_ms=1500) == b"retry: 1500\ndata: x\n\n"
    with pytest.raises(ValueError):
        sse.encode("x", retry_ms=-1)


@pytest.mark.parametrize("bad", ["a\nb", "a\rb"])
def test_names_and_ids_cannot_break_lines(bad: str) -> None:
    with pytest.raises(ValueError):
        sse.encode("x", event=bad)
    with pytest.raises(ValueError):
        sse.encode("x", id=bad)
    with pytest.raises(ValueError):
        sse.encode("x", id="a\0b")


def test_comments_are_ignored_by_clients() -> None:
    assert sse.KEEP_ALIVE == b": keep-alive\n\n"
    assert sse.comment("a\nb") == b": a\n: b\n\n"
    assert parse(sse.comment("hello") + sse.encode("x", event="e")) == [("e", "x", "")]


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, None), ("", None), ("   ", None), (" abc ", "abc"), ("x" * 129, None), ("a\nb", None), ("a\0", None)],
)
def test_last_event_id(header: str | None, expected: str | None) -> None:
    assert sse.last_event_id(header) == expected


@settings(max_examples=200, database=None)
@given(
    st.text(alphabet=st.characters(exclude_categories=("Cs",))),
    st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\r\n\0"), min_size=1, max_size=20),
)
def test_round_trip(data: str, name: str) -> None:
    """Whatever the data, the client reads back the same text (line breaks normalised)."""
    [(event, parsed, event_id)] = parse(sse.encode(data, event=name.strip() or "x", id="i1"))
    expected = data.replace("\r\n", "\n").replace("\r", "\n")
    assert parsed == expected and event_id == "i1"


def read_back(stream: bytes, step: int) -> list[sse.ReceivedEvent]:
    parser = sse.EventStreamParser()
    events: list[sse.ReceivedEvent] = []
    for index in range(0, len(stream), step):
        events += parser.feed(stream[index : index + step])
    return events


def test_the_client_role_reads_events_across_chunks_and_any_line_break() -> None:
    stream = (
        b': keep-alive\n\nevent: connected\ndata: {"channelUsername":"a"}\n\n'
        b'event: chat.message\r\nid: 17\r\ndata: {"x":\r\ndata: 1}\r\n\r\n'
        b"data: plain\rid: bad\0id\r\r\n"
    )
    expected = [
        sse.ReceivedEvent("connected", '{"channelUsername":"a"}', None),
        sse.ReceivedEvent("chat.message", '{"x":\n1}', "17"),
        sse.ReceivedEvent("message", "plain", "17"),  # the id carries over; one with NUL is ignored
    ]
    for step in (1, 2, 7, len(stream)):
        assert read_back(stream, step) == expected


@settings(max_examples=100, database=None)
@given(
    st.text(alphabet=st.characters(exclude_categories=("Cs",))),
    st.integers(min_value=1, max_value=13),
)
def test_the_client_role_reads_back_what_the_server_role_writes(data: str, step: int) -> None:
    stream = sse.comment("hi") + sse.encode(data, event="chat.message", id="e1") + sse.KEEP_ALIVE
    expected = data.replace("\r\n", "\n").replace("\r", "\n")
    assert read_back(stream, step) == [sse.ReceivedEvent("chat.message", expected, "e1")]
