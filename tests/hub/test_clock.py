"""Writing times: `iso8601` against the standard library's reading of what it wrote."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from volthub.hub.clock import EPOCH_MS_MAX, EPOCH_MS_MIN, iso8601


def _read_back(text: str) -> int:
    moment = datetime.fromisoformat(text.removesuffix("Z")).replace(tzinfo=UTC)
    return round((moment - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1000)


@given(st.lists(st.integers(EPOCH_MS_MIN, EPOCH_MS_MAX), min_size=1, max_size=8))
def test_every_time_in_the_calendar_reads_back_as_itself_in_any_order(times: list[int]) -> None:
    # In turns, so that a second written just before (another one, or the same) is in play.
    for epoch_ms in times + times[::-1]:
        text = iso8601(epoch_ms)
        assert len(text) == 24 and text.endswith("Z")
        assert _read_back(text) == epoch_ms


def test_milliseconds_either_side_of_a_second_belong_to_their_own_seconds() -> None:
    assert iso8601(1_800_000_000_999) == "2027-01-15T08:00:00.999Z"
    assert iso8601(1_800_000_001_000) == "2027-01-15T08:00:01.000Z"
    assert iso8601(1_800_000_000_999) == "2027-01-15T08:00:00.999Z"
    assert iso8601(-1) == "1969-12-31T23:59:59.999Z"
    assert iso8601(0) == "1970-01-01T00:00:00.000Z"
