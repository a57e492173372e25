"""webhook_bench: deliveries over TLS to a local receiver, and the checks that decide its exit
status (it never waits forever, and a run that did not deliver everything fails)."""

from __future__ import annotations

import pytest

from tests.loadtest.usage import assert_usage_error
from volthub.loadtest import webhook_bench


@pytest.mark.slow
def test_every_delivery_succeeds_and_an_unmet_check_fails_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert webhook_bench.main(["--count", "50"]) == 0
    printed = capsys.readouterr().out
    assert "50 of 50 deliveries" in printed and "checks: all held" in printed
    assert webhook_bench.main(["--count", "20", "--check", "per_second>=1e9"]) == 1
    assert "NOT met          [sqlite] per_second >= 1e+09" in capsys.readouterr().out


@pytest.mark.slow
def test_deliveries_still_pending_when_the_time_runs_out_fail_the_default_checks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert webhook_bench.main(["--count", "500", "--timeout", "0.0001"]) == 1
    printed = capsys.readouterr().out
    assert "NOT met          [sqlite] every delivery succeeded within --timeout: pending == 0" in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--check", "speed>1"], "no figure named 'speed'"),
        (["--check", "sqlite:failed==0"], "no TARGET: prefix"),
        (["--count", "0"], "--count must be >= 1"),
    ],
)
def test_a_bad_option_is_a_usage_error_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_usage_error(webhook_bench.main, argv, message, capsys)
