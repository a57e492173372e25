"""The garbage collector's settings for processes that hold many long-lived objects.

CPython's default thresholds collect the young generation every 700 allocations and, now
and then, every generation: with thousands of connection objects alive, a full collection
costs hundreds of milliseconds, and it runs in whichever allocation crossed the threshold,
in the middle of serving (or, in the load-test generator, of reading) a burst of deliveries.
"""

from __future__ import annotations

import gc

# Allocations between young-generation collections: the server's default, and the load-test
# generators' (their own setting, so that the server's configuration never changes what
# the generator measures).
GENERATOR_GEN0_THRESHOLD = 100_000


def tune_garbage_collector(gen0_threshold: int) -> None:
    """Collect the young generation every `gen0_threshold` allocations, the older ones
    rarely, and keep every object alive now (imports, start-up state) out of every
    collection; 0 leaves the collector as it is."""
    if gen0_threshold > 0:
        gc.freeze()
        gc.set_threshold(gen0_threshold, 50, 1000)
