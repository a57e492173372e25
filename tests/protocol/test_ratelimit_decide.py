"""`decide`, the pure step both the in-memory `Gcra` and the shared store use, counts the
same as `Gcra` for any sequence of requests."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from volthub.protocol.ratelimit import Gcra, Rate, decide


@given(
    limit=st.integers(1, 50),
    gaps_ms=st.lists(st.integers(0, 5_000), min_size=1, max_size=200),
)
def test_decide_with_a_stored_tat_matches_gcra(limit: int, gaps_ms: list[int]) -> None:
    rate = Rate.per(limit, 60)
    gcra = Gcra(rate)
    stored: int | None = None
    now_ns = 1_700_000_000 * 10**9
    for gap in gaps_ms:
        now_ns += gap * 10**6
        expected = gcra.hit("k", now_ns)
        decision, stored = decide(rate, stored, now_ns)
        assert decision == expected


def test_a_refused_request_leaves_the_stored_tat_alone() -> None:
    rate = Rate.per(1, 60)
    first, tat = decide(rate, None, 10**18)
    second, unchanged = decide(rate, tat, 10**18)
    assert first.allowed and not second.allowed and unchanged == tat
