"""chat_bench: the profile split (py-spy's collapsed stacks counted by layer of the send path),
a short run on each listener, and the checks that decide its exit status."""

from __future__ import annotations

import pytest

from tests.loadtest.usage import assert_usage_error
from volthub.loadtest import chat_bench, checks
from volthub.loadtest.chat_bench import (
    OTHER_LAYER,
    Results,
    check_runs,
    default_checks,
    layer_split,
    run_bench,
)

TRUNK = "run (trio/_core/_run.py:2532);unrolled_run (trio/_core/_run.py:2866)"
HYPERCORN = f"{TRUNK};TCPServer.run (hypercorn/trio/tcp_server.py:76)"
QUART = f"{HYPERCORN};Quart.__call__ (quart/app.py:1);QuartTrio.full_dispatch_request (quart_trio/app.py:171)"
WORKER = "Thread.run (threading.py:982);WorkerThread._work (trio/_core/_thread_cache.py:211)"


def test_a_sample_counts_for_the_innermost_layer_it_passes_through():
    collapsed = "\n".join(
        [
            f"{HYPERCORN};send (trio/_socket.py:1) 30",  # a socket send under Hypercorn is Hypercorn's
            f"{QUART};Quart.dispatch_request (quart/app.py:2) 20",
            f"{QUART};_enforce_access (volthub/http/access.py:9);verify (volthub/services/tokens.py:3) 10",
            f"{QUART};send_message (volthub/http/blueprints/chat.py:5) 5",
            f"{QUART};wrapper (quart_schema/validation.py:1);validate (pydantic/main.py:1) 5",
            f"{TRUNK};ChannelActor.run (volthub/hub/actor.py:1);EventPublisher.write (volthub/hub/publisher.py:1) 10",
            f"{TRUNK};ChannelActor.run (volthub/hub/actor.py:1) 5",
            f"{TRUNK};_run_group (volthub/persistence/sqlite.py:1) 10",
            f"{TRUNK};deadline (trio/_core/_run.py:3) 5",
        ]
    )
    assert layer_split(collapsed) == {
        "Hypercorn and h11": 30.0,
        "Quart": 20.0,
        "auth and rate limits": 10.0,
        "publish and fan-out": 10.0,
        "database": 10.0,
        "HTTP middleware and hooks": 5.0,
        "validation": 5.0,
        "channel actor": 5.0,
        OTHER_LAYER: 5.0,
    }


def test_samples_of_a_waiting_thread_are_left_out():
    collapsed = "\n".join(
        [
            f"{WORKER} 900",  # an idle worker thread waiting for a job
            f"{TRUNK};get_events (trio/_core/_io_epoll.py:243) 50",  # the event loop waiting in epoll
            f"{WORKER};_run_group (volthub/persistence/sqlite.py:1) 40",
            f"{HYPERCORN} 60",
        ]
    )
    assert layer_split(collapsed) == {"Hypercorn and h11": 60.0, "database": 40.0}


def test_nothing_sampled_gives_an_empty_split():
    assert layer_split("") == {}
    assert layer_split(f"{WORKER} 12\nnot a stack line") == {}


def test_the_gateway_listener_is_a_layer_of_its_own_and_its_deliveries_are_the_fan_out():
    gateway = f"{TRUNK};Gateway._serve (volthub/http/events/gateway.py:1);Gateway._requests (volthub/http/events/gateway.py:2)"
    collapsed = "\n".join(
        [
            f"{gateway};Link.respond (volthub/http/events/gateway_connections.py:3);send_all (volthub/http/events/gateway_connections.py:4) 30",
            f"{gateway};GatewayRoute.__call__ (volthub/http/chat_send.py:5) 20",
            f"{TRUNK};Fanout.publish (volthub/hub/fanout.py:1);WireConnection.write (volthub/http/events/gateway_connections.py:9) 50",
        ]
    )
    assert layer_split(collapsed) == {
        "publish and fan-out": 50.0,
        "gateway listener": 30.0,
        "HTTP middleware and hooks": 20.0,
    }


async def test_a_short_run_on_each_listener_counts_acknowledged_and_delivered_sends(live_server):
    for post_url in (None, live_server.events_url):
        results = await run_bench(
            live_server.url, 0.3, 2, 1, live_server.events_url.replace("http", "ws", 1), post_url=post_url
        )
        assert results.accepted > 0 and set(results.statuses) == {200}
        assert results.delivered == results.accepted


def _report(listener: str, **figures: object) -> dict[str, object]:
    results = Results(latencies=[0.001 * n for n in range(1, 101)], elapsed=2.0, delivered=2000)
    results.statuses[200] = 2000
    return {"backend": "sqlite", "listener": listener, **results.summary(), **figures}


def test_a_run_has_the_figures_its_checks_name() -> None:
    report = _report("gateway")
    assert (report["sends_per_second"], report["errors"], report["undelivered"]) == (1000.0, 0, 0)
    assert report["latency_ms"]["p99"] == 99.0  # type: ignore[index]  # nearest rank, as every harness figure
    floor = Results(latencies=[0.001], elapsed=1.0)
    floor.statuses[200], floor.statuses[0] = 9, 1
    assert floor.summary(delivering=False)["undelivered"] is None
    assert floor.summary(delivering=False)["errors"] == 1


def test_checks_with_a_listener_prefix_hold_that_listeners_run_only() -> None:
    reports = [_report("main", sends_per_second=600.0), _report("gateway")]
    given = [
        checks.parse(text, known=chat_bench.CHECK_KEYS.__contains__)
        for text in ("gateway:sends_per_second>=1000", "latency_ms.p99<=100")
    ]
    outcomes = check_runs(reports, given)
    assert [(o["target"], o["key"], o["verdict"]) for o in outcomes] == [
        ("sqlite via main", "latency_ms.p99", "pass"),
        ("sqlite via gateway", "sends_per_second", "pass"),
        ("sqlite via gateway", "latency_ms.p99", "pass"),
    ]
    assert [o["key"] for o in reports[0]["checks"]] == ["latency_ms.p99"]  # type: ignore[union-attr]
    failing = check_runs([_report("gateway", sends_per_second=999.9)], given[:1])
    assert failing[0]["verdict"] == "fail"


def test_without_checks_every_send_is_answered_and_delivered_unless_it_only_measures_the_floor() -> None:
    assert [c.key for c in default_checks(floor=False)] == ["errors", "undelivered"]
    assert [c.key for c in default_checks(floor=True)] == ["errors"]
    assert check_runs([_report("gateway", undelivered=3)], default_checks(floor=False))[1]["verdict"] == "fail"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--check", "speed>=1"], "no figure named 'speed'"),
        (["--check", "sends_per_second=>1"], "KEY OP NUMBER"),
        (["--listener", "gateway", "--check", "main:errors==0"], "none of this run's: gateway"),
        (["--floor", "--check", "gateway:errors==0"], "none of this run's: main"),
    ],
)
def test_a_bad_check_is_a_usage_error_before_any_server_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_usage_error(chat_bench.main, argv, message, capsys)


@pytest.mark.slow
def test_a_check_not_met_makes_the_exit_status_1(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--seconds", "0.5", "--concurrency", "2", "--listener", "gateway", "--check", "undelivered==0"]
    assert chat_bench.main([*argv, "--check", "gateway:sends_per_second>=1e9"]) == 1
    printed = capsys.readouterr().out
    assert "checks: 1 of 2 NOT met" in printed
    assert "NOT met          [sqlite via gateway] gateway:sends_per_second >= 1e+09" in printed
    assert "met              [sqlite via gateway] undelivered == 0 (measured 0)" in printed
