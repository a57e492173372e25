"""The hold's plan: what the server's open-file limit allows, and how many generator processes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from volthub import cli
from volthub.loadtest import client, hold, hold_reader, hold_worker
from volthub.loadtest.metrics import Activity, ProcSample, split_figures
from volthub.loadtest.targets import Channel

LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            20000                20000                files
Max locked memory         8388608              8388608              bytes
"""


def test_open_files_limit_from_proc() -> None:
    assert hold.open_files_limit(LIMITS) == 20000
    assert hold.open_files_limit(LIMITS.replace("20000                20000", "unlimited unlimited")) is None
    assert hold.open_files_limit("") is None


def test_the_hold_is_capped_by_the_servers_fd_limit_and_says_why() -> None:
    plan = hold.plan_hold(20_000, 0, server_fd_limit=20_000, server_fds_open=40, own_limit=20_000)
    assert plan.sockets == 20_000 - hold.SERVER_RESERVE
    assert plan.requested == 20_000 and plan.server_fd_limit == 20_000
    assert plan.note and "20,000" in plan.note and f"{plan.sockets:,}" in plan.note
    assert plan.processes == 1, "the generator's limit fits them"
    spread = hold.plan_hold(20_000, 0, server_fd_limit=20_000, server_fds_open=40, own_limit=9_000)
    assert spread.processes == 3, "8,900 sockets per generator process at most"


def test_a_hold_that_fits_is_not_capped() -> None:
    plan = hold.plan_hold(5_000, 0, server_fd_limit=20_000, server_fds_open=40, own_limit=20_000)
    assert (plan.sockets, plan.processes, plan.note) == (5_000, 1, None)
    assert hold.plan_hold(5_000, 4, None, 0, 20_000).processes == 4, "asked for more processes: given"
    assert hold.plan_hold(5_000, 1, None, 0, 1_100).processes == 5, "1,000 sockets per process at most"


def test_split_spreads_the_sockets_evenly() -> None:
    assert hold.split(10, 3) == [4, 3, 3]
    assert hold.split(2, 4) == [1, 1, 0, 0]
    assert sum(hold.split(19_860, 2)) == 19_860


def test_each_server_worker_holds_its_own_share_of_the_sockets() -> None:
    plan = hold.plan_hold(50_000, 0, server_fd_limit=20_000, server_fds_open=40, own_limit=20_000, server_processes=4)
    assert plan.sockets == 50_000 and plan.note is None, "4 workers hold 4 x 19,728"
    capped = hold.plan_hold(50_000, 0, 20_000, 40, 20_000, server_processes=2)
    assert capped.sockets == 2 * (20_000 - hold.SERVER_RESERVE)
    assert capped.note and "2 processes" in capped.note


def test_source_addresses_are_planned_from_the_ephemeral_range() -> None:
    ports = hold.ephemeral_ports("32768\t60999\n")
    assert ports == 28_232
    assert hold.ports_per_address(ports) == 6_933, "a quarter of what the margin leaves: connect() slows as it fills"
    plan = hold.plan_hold(250_000, 0, None, 0, 20_000, per_address=hold.ports_per_address(ports))
    assert plan.addresses == 37, "250,000 / 6,933 rounded up"
    assert plan.processes == 13, "19,900 sockets per generator process at most"
    assert hold.plan_hold(300, 0, None, 0, 20_000, per_address=27_732).addresses == 1
    assert hold.plan_hold(300, 0, None, 0, 20_000, per_address=27_732, addresses=2).addresses == 2, "asked for"
    assert hold.plan_hold(300, 0, None, 0, 20_000, per_address=None, addresses=2).addresses == 0, "not loopback"
    assert hold.source_addresses(3) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    with pytest.raises(ValueError, match="253"):
        hold.plan_hold(254 * 100, 0, None, 0, 1 << 20, per_address=100)


def test_reconnect_back_off_doubles_to_five_seconds_randomised_by_half() -> None:
    rng = random.Random(7)
    for attempt, base in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 5.0), (40, 5.0)]:
        delays = [hold_worker.backoff(attempt, rng) for _ in range(200)]
        assert all(base * 0.5 <= delay <= base * 1.5 for delay in delays)
        assert min(delays) < base < max(delays), "spread both ways, so clients do not come back at once"


def sample(at: float, cpu: float) -> ProcSample:
    return ProcSample(at, cpu, 0)


def test_upkeep_leaves_out_the_seconds_a_broadcast_keeps_the_server_busy() -> None:
    samples = [sample(float(second), second * 0.1) for second in range(21)]
    samples[12] = sample(12.0, samples[11].cpu_seconds + 5.0)  # the broadcast at 10 s
    samples[13:] = [sample(s.at, s.cpu_seconds + 5.0) for s in samples[13:]]
    cpu, seconds = hold.quiet_upkeep(samples, [10.0])
    assert seconds == 20 - 7, "the seconds 9-10 to 15-16 touch the send (at 10 s) and the 5 s after it"
    assert cpu == pytest.approx(0.1 * seconds)
    assert hold.quiet_upkeep(samples, []) == (pytest.approx(samples[-1].cpu_seconds), 20.0)


def test_generator_cpu_per_delivery_is_the_holds_cpu_beyond_its_quiet_rate() -> None:
    samples = [sample(float(second), second * 0.01) for second in range(21)]
    ends = [
        {"cpu": 0.7, "deliveries": {"0": [1.0] * 50_000}, "recognised": 49_999},
        {"cpu": 0.5, "deliveries": {"0": [1.0] * 50_000}, "recognised": 50_000},
    ]
    found = hold.generator_figures([{"cpu": 2.0}], ends, 1000, 20.0, samples, [10.0])
    assert found["cpu_us_per_delivery"] == pytest.approx(10.0), "(1.2 s - 0.01 s/s x 20 s) / 100,000"
    assert found["cpu_ms_per_connect"] == 2.0 and found["cpu_us_per_socket_second"] == 60.0
    assert found["recognised_reads"] == 99_999
    assert hold.generator_figures([{"cpu": 2.0}], ends, 1000, 20.0, [], [10.0])["cpu_us_per_delivery"] is None


def test_broadcast_figures_count_each_reach_and_every_miss() -> None:
    ends: list[dict[str, Any]] = [
        {"deliveries": {"0": [5.0, 7.0], "1": [30.0]}, "duplicates": 2},
        {"deliveries": {"0": [6.0, 9.0], "1": [20.0, 40.0]}},
    ]
    found = hold.broadcast_figures([(0, 10.0), (1, 20.0), (2, 30.0)], ends, held=4)
    assert [row["reached"] for row in found["each"]] == [4, 3, 0]
    assert [row["last_ms"] for row in found["each"]] == [9.0, 40.0, None]
    assert found["missed"] == 0 + 1 + 4 and found["sent"] == 3
    assert found["last_ms_max"] == 40.0 and found["latency_ms"]["count"] == 7
    assert found["duplicates"] == 2


async def test_a_client_socket_connects_from_the_source_address_it_is_given() -> None:
    peers: list[str] = []
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    stream = await client._open_tcp("127.0.0.1", port, "127.0.0.3")
    sock, peer = await listener.accept()
    peers.append(peer[0])
    assert stream.socket.getsockname()[0] == "127.0.0.3"
    sock.close()
    listener.close()
    await stream.aclose()
    assert peers == ["127.0.0.3"]


@pytest.mark.slow
def test_a_small_hold_over_two_addresses_and_processes_broadcasts_and_comes_back(tmp_path: Path) -> None:
    out = tmp_path / "hold.json"
    argv = ["loadtest", "--spawn", "--target", "volthub-gateway", "--clients", "0", "--quiet"]
    argv += ["--hold", "240", "--hold-addresses", "2", "--hold-processes", "2", "--hold-seconds", "4"]
    argv += ["--hold-broadcast-every", "1", "--hold-restart", "--hold-restart-timeout", "60"]
    argv += ["--workdir", str(tmp_path), "--json", str(out)]
    database = os.environ.get("VOLTHUB_TEST_POSTGRES")
    if database:
        argv += ["--database", database]
    assert cli.main(argv) == 0
    found = orjson.loads(out.read_bytes())["runs"][0]["hold"]
    assert (found["connected"], found["processes"], found["addresses"]) == (240, 2, 2)
    assert found["disconnects"] == 0 and found["generator_failures"] == 0
    broadcasts = found["broadcasts"]
    assert broadcasts["sent"] >= 2 and broadcasts["missed"] == 0 and broadcasts["failed"] == 0
    assert all(row["reached"] == 240 for row in broadcasts["each"])
    restart = found["restart"]
    assert restart["back"] == 240 and restart["not_back"] == 0
    assert restart["resumable"] == 240, "every socket had an event id to resume from"
    assert found["server"]["cpu_ms_per_connect"] is not None
    assert found["generator"]["cpu_ms_per_connect"] is not None
    # Any user may pick the batch policy on Linux, and the report says every process did.
    assert (found["generator"]["processes"], found["generator"]["batch_processes"]) == (2, 2)


def test_the_machines_own_limits_are_told_apart_from_the_servers_answers() -> None:
    errors = {
        "OSError: [Errno 99] Cannot assign requested address": 120,
        "OSError: [Errno 24] Too many open files": 3,
        "ProtocolError: connect refused: {'code': 'invalid_token'}": 5,
    }
    assert hold.machine_refusals(errors) == {"no free local port": 120, "open-file limit": 3}
    assert hold.machine_refusals({"connect timeout": 9}) == {}


def test_the_serving_processes_of_a_server_with_workers_are_its_children() -> None:
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert hold.serving_processes(worker.pid) == [worker.pid], "no children: it serves itself"
        found = hold.serving_processes(os.getpid())
        assert worker.pid in found and os.getpid() not in found, "a parent of workers serves nothing itself"
    finally:
        worker.kill()
        worker.wait()


async def test_a_connect_the_server_refuses_is_recorded_as_that_sockets_failure() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    state = hold_reader.HoldState(run_tag="t", start=0.0)
    reader = hold_reader.Reader(state, "t", lambda slot: None)
    slot = client.ClientSlot(0, 0, "socketio")
    options = client.SocketOptions("127.0.0.1", port, connect_timeout=5, source="127.0.0.3")
    gate = trio.Semaphore(0)
    connected = await hold_worker.connect(slot, Channel(0, "hold", "token"), options, state, reader, gate)
    assert not connected and "Errno 111" in (slot.error or "")
    assert state.connect_errors == {slot.error: 1} and gate.value == 1, "the gate is given back"
    assert reader.held == {}
    reader.close()


def test_the_ramp_and_hold_are_split_into_user_and_kernel_time_and_switches() -> None:
    activity = {
        "before": Activity(1.0, 0.5, 100, 10),
        "held": Activity(3.0, 1.5, 300, 1010),
        "after": Activity(4.0, 3.5, 400, 1110),
    }
    found = split_figures(activity, 1000)
    assert found["user_ms_per_connect"] == 2.0 and found["system_ms_per_connect"] == 1.0
    assert found["wakeups_per_connect"] == 0.2 and found["preemptions_per_connect"] == 1.0
    assert found["hold_activity"] == {"user_seconds": 1.0, "system_seconds": 2.0, "wakeups": 100, "preemptions": 100}
    assert split_figures({"before": None, "held": Activity(1.0, 1.0, 1, 1), "after": None}, 1000) == {}
    # The generator processes report the same four numbers, summed over the processes.
    ramps = [{"cpu": 1.0, "activity": [0.5, 0.25, 300, 20]}, {"cpu": 1.0, "activity": [0.5, 0.25, 100, 0]}]
    ends = [{"cpu": 0.1, "deliveries": {}, "activity": [0.1, 0.0, 5, 1]}] * 2
    generator = hold.generator_figures(ramps, ends, 1000, 20.0, [], [])
    assert generator["user_ms_per_connect"] == 1.0 and generator["system_ms_per_connect"] == 0.5
    assert generator["wakeups_per_connect"] == 0.4 and generator["preemptions_per_connect"] == 0.02
    assert generator["hold_activity"]["wakeups"] == 10


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies")
def test_a_generator_process_runs_as_a_batch_job_so_its_wake_ups_do_not_preempt_the_server() -> None:
    code = (
        "import os; from volthub.loadtest import hold_worker as w; print(w.yield_to_server(), os.sched_getscheduler(0))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", str(os.SCHED_BATCH)]


async def test_the_restart_wait_ends_once_every_socket_is_back_in_whatever_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slots = [client.ClientSlot(index, 0, "socketio", connected_at=0.5) for index in range(3)]
    slots[2].connected_at = 2.0  # the last one came back first
    waited: list[float] = []

    async def wait() -> None:
        await hold_worker._until_all_connected_after(slots, since=1.0)
        waited.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.sleep(1)
        slots[1].connected_at = 3.0
        await trio.sleep(1)
        assert not waited, "slot 0 is not back yet"
        slots[0].connected_at = 4.0
    assert len(waited) == 1


async def test_lost_sockets_reconnect_after_their_back_off_in_the_order_they_fall_due(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each lost socket's attempt starts once its back-off has passed and a connect slot is
    free; an attempt that fails is tried again after the next, longer back-off."""
    del autojump_clock
    attempts: list[tuple[float, int]] = []
    in_flight, most_in_flight = 0, 0

    async def fake_connect(slot: client.ClientSlot, *args: Any) -> bool:
        nonlocal in_flight, most_in_flight
        gate: trio.Semaphore = args[-1]
        attempts.append((trio.current_time(), slot.index))
        in_flight += 1
        most_in_flight = max(most_in_flight, in_flight)
        await trio.sleep(0.2)  # the connect's round trips
        in_flight -= 1
        gate.release()
        failed_before = sum(1 for _, index in attempts if index == slot.index) > 1
        return slot.index != 0 or failed_before  # socket 0's first attempt is refused

    monkeypatch.setattr(hold_worker, "connect", fake_connect)
    state = hold_reader.HoldState(run_tag="t", start=0.0)
    reader = hold_reader.Reader(state, "t", lambda slot: None)
    reconnects = hold_worker.Reconnects(state, reader, Channel(0, "hold", "token"), trio.Semaphore(2))
    options = client.SocketOptions("127.0.0.1", 1)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(reconnects.run, nursery)
        for index in range(4):
            reconnects.add(client.ClientSlot(index, 0, "socketio"), options)
        await trio.sleep(20)
        state.closing = True
        nursery.cancel_scope.cancel()
    reader.close()
    firsts = [at - start for at, _ in attempts[:4]]
    assert all(0.5 <= at <= 1.5 + 0.4 for at in firsts), "the first attempts come after 0.5-1.5 s"
    assert firsts == sorted(firsts) and most_in_flight == 2, "in the order they fall due, two at a time"
    retried = [at - start for at, index in attempts[4:] if index == 0]
    assert len(attempts) == 5 and len(retried) == 1
    first_of_0 = next(at - start for at, index in attempts if index == 0)
    assert 1.0 <= retried[0] - (first_of_0 + 0.2) <= 3.0 + 0.4, "then after 1-3 s, the second back-off"
