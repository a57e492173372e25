"""Rate-limit arithmetic, sans-IO: GCRA on integer nanoseconds, with bounded memory.

GCRA (the generic cell rate algorithm, as in ATM networks and redis-cell) keeps ONE number
per key, the theoretical arrival time (TAT): the moment the key's budget would be full
again. A budget of `limit` requests per `period` allows a burst of `limit` requests, then
one more every `period / limit`; in any interval of length d at most
`limit + d * limit / period` requests pass. Compared with a fixed window it has no
double burst at window edges, and compared with a sliding log it needs O(1) memory per key.

All arithmetic is on integers, scaled by `limit`, so `period / limit` (60 s / 7, say) is
never rounded: a stored value v means the instant v / limit nanoseconds since the epoch.
Time is passed in; nothing here reads a clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

NS_PER_SECOND = 1_000_000_000
# Idle keys removed per `hit`: more than the one key a hit can add, so stale keys drain
# steadily, and few enough that one request never pays for a large sweep.
_EVICT_PER_HIT = 16
DEFAULT_MAX_KEYS = 100_000


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def to_ns(seconds: float) -> int:
    return round(seconds * NS_PER_SECOND)


@dataclass(frozen=True)
class Rate:
    limit: int
    period_ns: int

    def __post_init__(self) -> None:
        if self.limit < 1 or self.period_ns < 1:
            raise ValueError("a rate needs limit >= 1 and a positive period")

    @classmethod
    def per(cls, limit: int, seconds: float) -> Rate:
        return cls(limit, to_ns(seconds))


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int  # further requests that would pass right now
    reset_ns: int  # epoch ns at which `remaining` is back at `limit`
    retry_after_ns: int  # 0 when allowed; else how long until one request passes

    @property
    def reset(self) -> int:
        """X-RateLimit-Reset: Unix seconds, rounded up so the budget is full by then."""
        return _ceil_div(self.reset_ns, NS_PER_SECOND)

    @property
    def retry_after(self) -> int:
        """Retry-After: whole seconds, at least 1, rounded up so a retry then passes."""
        if self.allowed:
            return 0
        return max(1, _ceil_div(self.retry_after_ns, NS_PER_SECOND))


class Gcra:
    """One budget (e.g. chat sends) for many keys (e.g. users). Not thread-safe: Trio tasks
    call it without awaiting in between, so no lock is needed."""

    def __init__(self, rate: Rate, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be >= 1")
        self.rate = rate
        self.max_keys = max_keys
        # Scaled units (see module doc): one request costs `period_ns`, the whole budget
        # is `period_ns * limit`. Least recently touched key first, for eviction.
        self._cost = rate.period_ns
        self._capacity = rate.period_ns * rate.limit
        self._tats: OrderedDict[Hashable, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._tats)

    def hit(self, key: Hashable, now_ns: int) -> Decision:
        """Count one request for `key` at `now_ns` if the budget allows it."""
        self._evict_idle(now_ns * self.rate.limit)
        decision, tat = decide(self.rate, self._tats.get(key), now_ns)
        if decision.allowed:
            self._remember(key, tat)
        elif key in self._tats:
            self._tats.move_to_end(key)  # an active key must not be the next evicted
        return decision

    def _remember(self, key: Hashable, tat: int) -> None:
        self._tats[key] = tat
        self._tats.move_to_end(key)
        if len(self._tats) > self.max_keys:
            # Full of keys still inside their window: forget the least recently used
            # one. That key gets a fresh budget (lenient) rather than refusing new
            # clients (which would let whoever fills the table lock everyone else out).
            self._tats.popitem(last=False)

    def _evict_idle(self, here: int) -> None:
        """A key whose TAT has passed has its full budget: dropping it changes nothing."""
        for _ in range(_EVICT_PER_HIT):
            if not self._tats:
                return
            key, tat = next(iter(self._tats.items()))
            if tat > here:
                return
            del self._tats[key]


def decide(rate: Rate, stored_tat: int | None, now_ns: int) -> tuple[Decision, int]:
    """One request against a key's stored TAT (scaled units; None: a key never seen).

    Returns the decision and the TAT to store: the new one when allowed, else the stored
    one unchanged (a refused request is not counted). The same arithmetic serves the
    in-memory `Gcra` and a shared store (several processes, one database row per key).
    """
    limit = rate.limit
    cost, capacity = rate.period_ns, rate.period_ns * limit
    here = now_ns * limit
    tat = max(stored_tat if stored_tat is not None else here, here)
    allowed = tat + cost - here <= capacity
    if allowed:
        tat += cost
    remaining = (here + capacity - tat) // cost
    retry_ns = 0 if allowed else _ceil_div(tat + cost - capacity, limit) - now_ns
    decision = Decision(allowed, limit, remaining, _ceil_div(tat, limit), retry_ns)
    return decision, tat if allowed else (stored_tat if stored_tat is not None else 0)


def tightest(decisions: list[Decision]) -> Decision:
    """The decision the rate-limit headers report: a refusal first, else the least remaining."""
    return min(decisions, key=lambda d: (d.allowed, d.remaining, d.limit))
