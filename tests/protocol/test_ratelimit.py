"""GCRA arithmetic (sans-IO): exact limits, Retry-After, Reset, and bounded memory."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from volthub.protocol.ratelimit import NS_PER_SECOND, Decision, Gcra, Rate, tightest

MINUTE = 60 * NS_PER_SECOND
T0 = 1_700_000_000 * NS_PER_SECOND


class ModelGcra:
    """GCRA as usually written (emission interval T = period / limit), on exact fractions."""

    def __init__(self, limit: int, period_ns: int) -> None:
        self.limit, self.period = limit, period_ns
        self.interval = Fraction(period_ns, limit)
        self.tat: dict[str, Fraction] = {}

    def hit(self, key: str, now: int) -> tuple[bool, int]:
        tat = max(self.tat.get(key, Fraction(now)), Fraction(now))
        allowed = tat + self.interval - now <= self.period
        if allowed:
            tat += self.interval
            self.tat[key] = tat
        remaining = int((now + self.period - tat) // self.interval)
        return allowed, remaining


def test_burst_of_exactly_limit_then_refusal() -> None:
    limiter = Gcra(Rate(30, MINUTE))
    decisions = [limiter.hit("alice", T0) for _ in range(31)]
    assert [d.allowed for d in decisions] == [True] * 30 + [False]
    assert [d.remaining for d in decisions[:3]] == [29, 28, 27]
    assert decisions[29].remaining == 0 and decisions[30].remaining == 0


def test_refusal_reports_when_one_request_passes_and_when_the_budget_is_full() -> None:
    limiter = Gcra(Rate(30, MINUTE))
    for _ in range(30):
        limiter.hit("alice", T0)
    refused = limiter.hit("alice", T0)
    # One request returns every 60 s / 30 = 2 s; the whole budget after 60 s.
    assert refused.retry_after_ns == 2 * NS_PER_SECOND and refused.retry_after == 2
    assert refused.reset_ns == T0 + MINUTE and refused.reset == T0 // NS_PER_SECOND + 60


def test_budget_is_full_again_after_the_window() -> None:
    limiter = Gcra(Rate(5, MINUTE))
    for _ in range(5):
        limiter.hit("k", T0)
    assert not limiter.hit("k", T0).allowed
    later = [limiter.hit("k", T0 + 2 * MINUTE) for _ in range(6)]
    assert [d.allowed for d in later] == [True] * 5 + [False]


def test_keys_do_not_share_a_budget() -> None:
    limiter = Gcra(Rate(1, MINUTE))
    assert limiter.hit("a", T0).allowed
    assert not limiter.hit("a", T0).allowed
    assert limiter.hit("b", T0).allowed


def test_refused_requests_do_not_push_the_retry_time_back() -> None:
    limiter = Gcra(Rate(2, MINUTE))
    limiter.hit("k", T0)
    limiter.hit("k", T0)
    first = limiter.hit("k", T0)
    for _ in range(10):
        limiter.hit("k", T0 + NS_PER_SECOND)
    assert limiter.hit("k", T0 + first.retry_after_ns).allowed


def test_retry_after_is_at_least_one_second() -> None:
    limiter = Gcra(Rate(600, MINUTE))  # a request returns every 0.1 s
    for _ in range(600):
        limiter.hit("k", T0)
    refused = limiter.hit("k", T0)
    assert refused.retry_after_ns == NS_PER_SECOND // 10 and refused.retry_after == 1


def test_idle_keys_are_dropped() -> None:
    limiter = Gcra(Rate(10, MINUTE))
    for n in range(40):
        limiter.hit(f"ip{n}", T0)
    assert len(limiter) == 40
    for n in range(3):
        limiter.hit(f"new{n}", T0 + MINUTE)  # every old key has its full budget back
    assert len(limiter) == 3


def test_key_cap_forgets_the_least_recently_used() -> None:
    limiter = Gcra(Rate(1, MINUTE), max_keys=2)
    limiter.hit("a", T0)
    limiter.hit("b", T0)
    limiter.hit("a", T0)  # refused, but "a" was just seen
    limiter.hit("c", T0)
    assert len(limiter) == 2
    assert not limiter.hit("a", T0).allowed  # still remembered
    assert limiter.hit("b", T0).allowed  # forgotten: a fresh budget


def test_tightest_prefers_a_refusal_then_the_least_remaining() -> None:
    ok_many = Decision(True, 600, 590, T0, 0)
    ok_few = Decision(True, 30, 2, T0, 0)
    ok_none_left = Decision(True, 5, 0, T0, 0)
    refused = Decision(False, 600, 0, T0, 5)
    assert tightest([ok_many, ok_few]) is ok_few
    assert tightest([ok_none_left, refused]) is refused  # the 429's own budget, whatever its size


def test_rate_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Rate(0, MINUTE)
    with pytest.raises(ValueError):
        Gcra(Rate(1, MINUTE), max_keys=0)


# --- properties ------------------------------------------------------------------------------

limits = st.integers(min_value=1, max_value=40)
periods = st.sampled_from([MINUTE, 3600 * NS_PER_SECOND, 7 * NS_PER_SECOND, 1000])
# (key, gap since the previous request in ns): many requests land at the same instant.
traffic = st.lists(st.tuples(st.sampled_from("abc"), st.one_of(st.just(0), st.integers(0, 5 * MINUTE))), max_size=120)


def _run(limiter: Gcra, requests: list[tuple[str, int]]) -> list[tuple[str, int, Decision]]:
    now, seen = T0, []
    for key, gap in requests:
        now += gap
        seen.append((key, now, limiter.hit(key, now)))
    return seen


@settings(max_examples=300)
@given(limits, periods, traffic)
def test_matches_the_textbook_model(limit: int, period: int, requests: list[tuple[str, int]]) -> None:
    model = ModelGcra(limit, period)
    for key, now, decision in _run(Gcra(Rate(limit, period)), requests):
        assert (decision.allowed, decision.remaining) == model.hit(key, now)


@settings(max_examples=300)
@given(limits, periods, traffic)
def test_no_interval_lets_more_than_burst_plus_rate_through(
    limit: int, period: int, requests: list[tuple[str, int]]
) -> None:
    passed = [(key, now) for key, now, d in _run(Gcra(Rate(limit, period)), requests) if d.allowed]
    for key in "abc":
        times = [now for k, now in passed if k == key]
        for i in range(len(times)):
            for j in range(i, len(times)):
                count = j - i + 1
                assert (count - limit) * period <= (times[j] - times[i]) * limit


@settings(max_examples=200)
@given(limits, periods, traffic)
def test_retry_after_and_reset_are_exact(limit: int, period: int, requests: list[tuple[str, int]]) -> None:
    limiter = Gcra(Rate(limit, period))
    now = T0
    for key, gap in requests:
        now += gap
        before = copy.deepcopy(limiter)
        decision = limiter.hit(key, now)
        if not decision.allowed:
            assert decision.retry_after_ns >= 1 and decision.retry_after >= 1
            assert not copy.deepcopy(before).hit(key, now + decision.retry_after_ns - 1).allowed
            assert copy.deepcopy(before).hit(key, now + decision.retry_after_ns).allowed
            assert copy.deepcopy(before).hit(key, now + decision.retry_after * NS_PER_SECOND).allowed
        at_reset = copy.deepcopy(limiter).hit(key, decision.reset_ns)
        assert at_reset.allowed and at_reset.remaining == limit - 1
        if decision.reset_ns - 1 >= now:
            just_before = copy.deepcopy(limiter).hit(key, decision.reset_ns - 1)
            assert not (just_before.allowed and just_before.remaining == limit - 1)


@settings(max_examples=200)
@given(limits, traffic)
def test_remaining_is_what_passes_next(limit: int, requests: list[tuple[str, int]]) -> None:
    limiter = Gcra(Rate(limit, MINUTE))
    now = T0
    for key, gap in requests:
        now += gap
        decision = limiter.hit(key, now)
        probe = copy.deepcopy(limiter)
        outcomes = [probe.hit(key, now).allowed for _ in range(decision.remaining + 1)]
        assert outcomes == [True] * decision.remaining + [False]


@settings(max_examples=200)
@given(st.integers(1, 8), st.lists(st.tuples(st.integers(0, 50), st.integers(0, MINUTE // 4)), max_size=200))
def test_memory_stays_under_the_cap(cap: int, requests: list[tuple[int, int]]) -> None:
    limiter = Gcra(Rate(3, MINUTE), max_keys=cap)
    now = T0
    for key, gap in requests:
        now += gap
        limiter.hit(key, now)
        assert len(limiter) <= cap
