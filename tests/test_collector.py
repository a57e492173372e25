"""The garbage collector's settings for the server and the load-test generators."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from volthub.collector import tune_garbage_collector


@pytest.fixture
def collector_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector_restored")
def test_tuning_collects_the_young_generation_less_often_and_freezes_what_lives_now() -> None:
    gc.unfreeze()
    tune_garbage_collector(123_456)
    assert gc.get_threshold() == (123_456, 50, 1000)
    assert gc.get_freeze_count() > 0, "start-up objects stay out of every collection"


@pytest.mark.usefixtures("collector_restored")
def test_a_threshold_of_zero_leaves_the_collector_as_it_is() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    tune_garbage_collector(0)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
