"""The test workers' port blocks (tests/ports.py): disjoint, below the kernel's ephemeral range,
and a port bound now is never handed out."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

from tests.ports import FIRST, SPAN, block_free_port, worker_block


def test_worker_blocks_are_disjoint_and_below_the_ephemeral_range() -> None:
    for count in (1, 2, 3, 8):
        blocks = [worker_block(f"gw{index}", count) for index in range(count)]
        ports = [port for block in blocks for port in block]
        assert len(ports) == len(set(ports)), f"{count} workers share a port"
        assert min(ports) >= FIRST and max(ports) < FIRST + SPAN
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert ephemeral_low >= FIRST + SPAN + 10_000, "a Redis Cluster bus port (port + 10000) would be ephemeral"


def test_a_bound_port_of_the_block_is_skipped() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        free_port = block_free_port(range(port, port + 1), fallback=lambda: -1)
        assert free_port() == -1, "the only port of the block is bound: the fallback answers"
    assert free_port() == port


def test_ports_are_handed_out_in_turn_not_twice_in_a_row() -> None:
    fallbacks = itertools.count(-1, -1)
    # Ports no worker's block holds (nor a Redis Cluster bus port, a block's port + 10000),
    # below the ephemeral range: a server of another worker binding one of them now and then
    # would make the block go round twice.
    block = range(FIRST + SPAN + 10_000, FIRST + SPAN + 10_050)
    free_port = block_free_port(block, fallback=lambda: next(fallbacks))
    drawn = [free_port() for _ in block]
    assert len(set(drawn)) == len(block), "a port came back before the block went round"
    assert all(port in block or port < 0 for port in drawn)
