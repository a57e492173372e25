"""Checks over a run's figures: parsing, verdicts (never a pass on a figure not measured), JUnit."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from volthub.loadtest import checks


def run(**delivery: Any) -> dict[str, Any]:
    return {
        "target": "volthub",
        "delivery": {
            "ratio": 0.5,
            "latency_ms": {"p50": 3.0, "p99": None, "p99.9": None, "too_few_samples": True},
            **delivery,
        },
        "send": {"errors": 3},
        "server": {"cpu_percent": None},
        "stages": {"steady": {"delivery": {"ratio": 1.0}}},
    }


@pytest.mark.parametrize(
    ("text", "key", "op", "limit"),
    [
        ("delivery.ratio>=0.999", "delivery.ratio", ">=", 0.999),
        (" delivery.latency_ms.p99 < 200 ", "delivery.latency_ms.p99", "<", 200.0),
        ("delivery.latency_ms.p99.9<=1e3", "delivery.latency_ms.p99.9", "<=", 1000.0),
        ("send.errors==0", "send.errors", "==", 0.0),
        ("clients.disconnects!=-1", "clients.disconnects", "!=", -1.0),
        ("stages.steady.delivery.ratio>0.5", "stages.steady.delivery.ratio", ">", 0.5),
        ("stages.a.b.send.late==0", "stages.a.b.send.late", "==", 0.0),
        ("stages.up.delivery.latency_ms.p99<9", "stages.up.delivery.latency_ms.p99", "<", 9.0),
        ("stages.up.reconnect.recovered_ratio>=1", "stages.up.reconnect.recovered_ratio", ">=", 1.0),
        ("delivery.by_kind.slow.ratio>=0", "delivery.by_kind.slow.ratio", ">=", 0.0),
        (
            "vs.node.server.cpu_seconds_per_1000_deliveries<=0.4",
            "vs.node.server.cpu_seconds_per_1000_deliveries",
            "<=",
            0.4,
        ),
        (
            "vs.python-socketio.connect.server_cpu_ms_per_connect<1",
            "vs.python-socketio.connect.server_cpu_ms_per_connect",
            "<",
            1.0,
        ),
    ],
)
def test_parse(text: str, key: str, op: str, limit: float) -> None:
    check = checks.parse(text)
    assert (check.key, check.op, check.limit) == (key, op, limit)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("delivery.ratio", "KEY OP NUMBER"),
        ("delivery.ratio=>1", "KEY OP NUMBER"),
        ("delivery.ratio>=high", "KEY OP NUMBER"),
        ("delivery.rate>=1", "no figure named"),
        ("stages.steady.server.cpu_percent<5", "no figure named"),
        ("delivery.by_kind.slow.latency_ms.p99<5", "no figure named"),
        ("stages.steady.clients.requested>1", "no figure named"),
        ("stages.steady.send.per_second>1", "no figure named"),
        ("vs.node.delivery.ratio>1", "no figure named"),
        ("vs.server.cpu_seconds_per_1000_deliveries<1", "no figure named"),
        ("gateway:delivery.rate>=1", "no figure named"),
        (":delivery.ratio>=1", "KEY OP NUMBER"),
    ],
)
def test_parse_refuses(text: str, message: str) -> None:
    with pytest.raises(checks.CheckError, match=message):
        checks.parse(text)


def test_verdicts() -> None:
    found = {
        text: checks.evaluate(checks.parse(text), run())["verdict"]
        for text in (
            "delivery.ratio>=0.999",
            "delivery.ratio<1",
            "delivery.latency_ms.p50<5",
            "delivery.latency_ms.p99<200",
            "delivery.latency_ms.p99.9<200",
            "server.cpu_percent<50",
            "send.errors==0",
            "stages.steady.delivery.ratio==1",
            "stages.other.delivery.ratio==1",
        )
    }
    assert found == {
        "delivery.ratio>=0.999": "fail",
        "delivery.ratio<1": "pass",
        "delivery.latency_ms.p50<5": "pass",
        "delivery.latency_ms.p99<200": "too few samples",
        "delivery.latency_ms.p99.9<200": "too few samples",
        "server.cpu_percent<50": "not measured",
        "send.errors==0": "fail",
        "stages.steady.delivery.ratio==1": "pass",
        "stages.other.delivery.ratio==1": "not measured",
    }


def test_only_a_pass_passes_and_the_table_never_says_met_for_too_few_samples() -> None:
    outcomes = [checks.evaluate(checks.parse("delivery.latency_ms.p99<200"), run())]
    assert not checks.passed(outcomes)
    line = checks.table(outcomes)
    assert line.startswith("too few samples") and "met" not in line


def test_default_checks_are_named_after_what_they_check() -> None:
    for check in checks.DEFAULT_CHECKS:
        assert checks.known_key(check.key)
        assert check.name and check.name != check.expression


def test_every_documented_key_is_accepted() -> None:
    for key in checks.KEYS:
        assert checks.parse(f"{key}>=0").key == key
    assert "stages.NAME" in checks.keys_table()


def test_junit_has_one_case_per_check(tmp_path: Path) -> None:
    outcomes = [
        {**checks.evaluate(checks.parse(text, name), run()), "target": "volthub"}
        for text, name in (("delivery.ratio>=0.999", "nothing lost"), ("delivery.ratio<1", ""), ("send.errors==0", ""))
    ]
    path = tmp_path / "checks.xml"
    checks.write_junit(path, outcomes)
    root = ElementTree.parse(path).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "2"
    cases = root.findall("./testsuite/testcase")
    assert [case.get("name") for case in cases] == [
        "nothing lost (delivery.ratio >= 0.999)",
        "delivery.ratio < 1",
        "send.errors == 0",
    ]
    assert [case.find("failure") is not None for case in cases] == [True, False, True]
    assert cases[0].get("classname") == "loadtest.volthub"


def test_a_target_prefix_applies_a_check_to_that_target_only() -> None:
    check = checks.parse(" volthub-gateway : vs.node.server.cpu_seconds_per_1000_deliveries <= 0.4")
    assert (check.target, check.key, check.limit) == (
        "volthub-gateway",
        "vs.node.server.cpu_seconds_per_1000_deliveries",
        0.4,
    )
    assert check.expression == "volthub-gateway:vs.node.server.cpu_seconds_per_1000_deliveries <= 0.4"
    assert check.applies_to("volthub-gateway") and not check.applies_to("volthub")
    assert checks.parse("delivery.ratio>=1").applies_to("node")


def test_a_prefix_naming_no_target_of_the_run_is_a_usage_problem() -> None:
    given = [checks.parse("node:send.errors==0"), checks.parse("nginx:send.errors==0"), checks.parse("send.errors==0")]
    assert (
        checks.stray_targets(given, ["volthub", "node"])
        == "--check names nginx, which is none of this run's: volthub, node"
    )
    assert checks.stray_targets(given[:1], ["node"]) is None
    assert checks.stray_targets(given[:1], []) == "--check takes no TARGET: prefix here (one run)"


def test_a_tool_with_figures_of_its_own_parses_against_them() -> None:
    check = checks.parse("main:speed>=3", known={"speed"}.__contains__, listed="in --help", example="speed>=1")
    assert (check.target, check.key) == ("main", "speed")
    with pytest.raises(checks.CheckError, match="listed in --help"):
        checks.parse("delivery.ratio>=1", known={"speed"}.__contains__, listed="in --help")


def test_a_ratio_to_a_reference_that_did_not_run_is_not_measured() -> None:
    check = checks.parse("vs.node.server.cpu_seconds_per_1000_deliveries<=0.4")
    ran = {"target": "volthub-gateway", "vs": {"node": {"server": {"cpu_seconds_per_1000_deliveries": 0.38}}}}
    assert checks.evaluate(check, ran)["verdict"] == "pass"
    assert checks.evaluate(check, {"target": "volthub-gateway"})["verdict"] == "not measured"
