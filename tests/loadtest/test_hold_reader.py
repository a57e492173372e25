"""The hold's reader: what it records from each socket's bytes, with and without its fast
path, checked against the general Socket.IO parse of the same frames."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from volthub.loadtest import hold_reader as hr
from volthub.loadtest import protocol as p
from volthub.loadtest.client import ClientSlot
from volthub.protocol import websocket
from volthub.protocol.engineio import packets as engineio
from volthub.protocol.socketio import packets as socketio

TAG = "runtag"
NOW_NS = 9_000_000_000  # every read happens at this monotonic time


def server_frame(payload: bytes) -> bytes:
    return websocket.server_frame(websocket.OP_TEXT, payload)


def client_reader() -> websocket.FrameReader:
    return websocket.FrameReader(1 << 24, websocket.Role.CLIENT)


def broadcast(
    seq: int, sent_ns: int, offset: str | None = "1700000000000-0", run_tag: str = TAG, size: int = 0
) -> bytes:
    envelope = {"type": "chat.message", "data": {"id": "m1", "message": p.make_message(run_tag, seq, sent_ns, size)}}
    items: list[Any] = ["event", envelope] + ([offset] if offset is not None else [])
    return b"4" + b"2" + orjson.dumps(items)


def by_name(seq: int) -> bytes:
    return b"42" + orjson.dumps(["chat.message", {"message": p.make_message(TAG, seq, 1)}])


OTHER_EVENT = b"42" + orjson.dumps(["event", {"type": "follow", "data": {}}, "1700000000001-0"])
GREETING = b"42" + orjson.dumps(["connected", {"user": 1}])


class Socket:
    """A held socket on one end of a socketpair; the test writes the server's bytes."""

    def __init__(self, reader: hr.Reader, index: int) -> None:
        self.ours, self.server = socket.socketpair()
        self.ours.setblocking(False)
        self.slot = ClientSlot(index, 0, "socketio", recovery=True)
        self.held = hr.Held(self.slot, self.ours, client_reader())
        reader.add(self.held, [])
        self.reader = reader

    def read(self, data: bytes) -> None:
        self.server.sendall(data)
        self.reader._read(self.held)

    def answers(self) -> bytes:
        self.server.setblocking(False)
        try:
            return self.server.recv(65536)
        except BlockingIOError:
            return b""


@contextmanager
def frozen_clock() -> Iterator[None]:
    with mock.patch.object(hr.time, "monotonic_ns", return_value=NOW_NS):
        yield


def new_reader() -> tuple[hr.HoldState, hr.Reader]:
    state = hr.HoldState(run_tag=TAG, start=time.monotonic())
    return state, hr.Reader(state, TAG, lambda slot: None)


def expected(payloads: list[bytes]) -> dict[str, Any]:
    """What a socket must record, by the general parse (the Socket.IO codec, parse_message)."""
    deliveries: dict[int, list[int]] = {}
    offset, last_seq, duplicates, pongs = None, -1, 0, 0
    for payload in payloads:
        text = payload.decode()
        if text == engineio.PING:
            pongs += 1
            continue
        if not text.startswith('42["event",'):
            continue
        data = socketio.decode_packet(engineio.decode_packet(text).data).data  # type: ignore[arg-type]
        if len(data) > 2 and isinstance(data[-1], str):
            offset = data[-1]
        found = p.parse_message(data[1]["data"].get("message", ""), TAG)
        if found is None:
            continue
        seq, sent_ns = found
        if seq == last_seq:
            duplicates += 1
            continue
        last_seq = seq
        deliveries.setdefault(seq, []).append(NOW_NS - sent_ns)
    return {"deliveries": deliveries, "offset": offset, "duplicates": duplicates, "pongs": pongs}


def test_a_broadcast_read_whole_is_recognised_on_the_next_socket() -> None:
    state, reader = new_reader()
    first, second = Socket(reader, 0), Socket(reader, 1)
    read = server_frame(broadcast(3, 1_000)) + server_frame(by_name(3))
    with frozen_clock():
        first.read(read)
        second.read(read)
    assert reader.fast == 1, "the second socket's read was the same bytes"
    assert list(state.by_seq[3]) == [NOW_NS - 1_000] * 2
    assert (first.slot.offset, second.slot.offset) == ("1700000000000-0",) * 2
    assert (first.slot.received, second.slot.received) == (1, 1)
    assert state.deliveries_ms() == {"3": [round((NOW_NS - 1_000) / 1e6, 2)] * 2}


def test_a_different_broadcast_of_the_same_length_falls_back_to_the_parse() -> None:
    state, reader = new_reader()
    first, second = Socket(reader, 0), Socket(reader, 1)
    with frozen_clock():
        first.read(server_frame(broadcast(3, 1_000)))
        second.read(server_frame(broadcast(4, 2_000)))
    assert reader.fast == 0
    assert {seq: list(found) for seq, found in state.by_seq.items()} == {3: [NOW_NS - 1_000], 4: [NOW_NS - 2_000]}


def test_a_read_that_is_not_a_broadcast_is_not_recognised_as_one() -> None:
    state, reader = new_reader()
    first, second = Socket(reader, 0), Socket(reader, 1)
    with frozen_clock():
        first.read(server_frame(OTHER_EVENT))
        second.read(server_frame(OTHER_EVENT))
        first.read(server_frame(broadcast(1, 5, run_tag="another")))
        second.read(server_frame(broadcast(1, 5, run_tag="another")))
    assert reader.fast == 0 and state.by_seq == {}
    assert second.slot.offset == "1700000000000-0", "the other event's id is still where a recovery resumes"


def test_a_broadcast_split_over_reads_counts_once_and_a_whole_one_after_it_is_recognised() -> None:
    state, reader = new_reader()
    first, second, third = Socket(reader, 0), Socket(reader, 1), Socket(reader, 2)
    frame = server_frame(broadcast(7, 100, size=300))
    with frozen_clock():
        second.read(frame[:5])
        first.read(frame)
        second.read(frame[5:])
        third.read(frame)
    assert reader.fast == 1, "only the third: the second's pieces took the parse"
    assert list(state.by_seq[7]) == [NOW_NS - 100] * 3


def test_a_read_that_did_more_than_deliver_is_not_remembered() -> None:
    state, reader = new_reader()
    first, second = Socket(reader, 0), Socket(reader, 1)
    read = server_frame(broadcast(3, 1_000)) + server_frame(OTHER_EVENT)
    with frozen_clock():
        first.read(read)
        second.read(read)
    assert reader.fast == 0, "the other event's id is an effect a comparison would not repeat"
    assert (first.slot.offset, second.slot.offset) == ("1700000000001-0",) * 2
    assert list(state.by_seq[3]) == [NOW_NS - 1_000] * 2


def test_a_broadcasts_bytes_inside_another_frame_are_not_a_delivery() -> None:
    state, reader = new_reader()
    first, second = Socket(reader, 0), Socket(reader, 1)
    known = server_frame(broadcast(3, 1_000))
    with frozen_clock():
        first.read(known)
        second.read(server_frame(known)[: -len(known)])  # a frame whose payload is those bytes
        second.read(known)
    assert reader.fast == 0 and list(state.by_seq[3]) == [NOW_NS - 1_000]
    assert second.slot.received == 0


def test_a_frame_longer_than_one_read_is_read_whole_in_one_wake() -> None:
    state, reader = new_reader()
    held = Socket(reader, 0)
    with frozen_clock():
        held.read(server_frame(broadcast(5, 1, size=hr.READ_SIZE + 5000)))
    assert list(state.by_seq[5]) == [NOW_NS - 1], "edge-triggered: no later wake would read the rest"


def test_the_same_broadcast_again_on_a_socket_counts_as_a_duplicate_not_a_delivery() -> None:
    state, reader = new_reader()
    held = Socket(reader, 0)
    frame = server_frame(broadcast(2, 10))
    with frozen_clock():
        held.read(frame)
        held.read(frame)
    assert len(state.by_seq[2]) == 1 and state.duplicates == 1 and held.slot.received == 1


def test_a_ping_is_answered_with_a_masked_pong() -> None:
    _, reader = new_reader()
    held = Socket(reader, 0)
    held.read(hr.PING_FRAME)
    answers = held.answers()
    assert answers == hr.PONG_FRAME
    assert websocket.FrameReader(1024).feed(answers) == ["3"], "the server's role reads it: masked"


def test_a_close_from_the_server_is_answered_with_its_code_and_loses_the_socket() -> None:
    state, reader = new_reader()
    held = Socket(reader, 0)
    held.read(b"\x88\x02\x03\xe9")  # close, 1001 going away
    assert held.slot.disconnected and state.disconnect_reasons == {"closed by server": 1}
    assert reader.held == {}
    answer = held.answers()
    assert websocket.FrameReader(1024).feed(answer) == [websocket.Close(1001, "")], "masked, code echoed"


def packets() -> st.SearchStrategy[bytes]:
    seqs = st.integers(0, 3)
    offsets = st.none() | st.from_regex(r"\A[0-9]{1,13}-[0-9]{1,3}\Z")
    return st.one_of(
        st.builds(broadcast, seqs, st.integers(0, 10**12), offsets, st.just(TAG), st.integers(0, 400)),
        st.builds(broadcast, seqs, st.integers(0, 10**12), offsets, st.sampled_from(["other", "runtag2"])),
        st.builds(by_name, seqs),
        st.sampled_from([b"2", OTHER_EVENT, GREETING, b"6"]),
    )


@settings(max_examples=150, deadline=None)
@given(
    payloads=st.lists(packets(), max_size=12),
    cuts=st.lists(st.lists(st.integers(0, 4000), max_size=6), min_size=1, max_size=3),
)
def test_what_each_socket_records_agrees_with_the_general_parse(payloads: list[bytes], cuts: list[list[int]]) -> None:
    """Every socket gets the same frames, each cut into reads its own way (a frame split
    over reads, several in one); fast path or not, each records what the general parse says."""
    stream = b"".join(server_frame(payload) for payload in payloads)
    state, reader = new_reader()
    sockets = [Socket(reader, index) for index in range(len(cuts))]
    with frozen_clock():
        for held, cut in zip(sockets, cuts, strict=True):
            bounds = sorted({0, len(stream), *(min(at, len(stream)) for at in cut)})
            for start, end in zip(bounds, bounds[1:], strict=False):
                held.read(stream[start:end])
    want = expected(payloads)
    found = {seq: list(latencies) for seq, latencies in state.by_seq.items() if latencies}
    assert found == {seq: latencies * len(sockets) for seq, latencies in want["deliveries"].items()}
    assert state.duplicates == want["duplicates"] * len(sockets)
    for held in sockets:
        assert held.slot.offset == want["offset"]
        assert held.slot.received == sum(len(latencies) for latencies in want["deliveries"].values())
        assert held.answers() == hr.PONG_FRAME * want["pongs"]
        assert not held.slot.disconnected
