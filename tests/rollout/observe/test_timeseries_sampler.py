"""`TimeseriesSampler`'s busy samples: their mean over a run is the engine's busy seconds over
the run's length, even when the engine books a forward's whole duration as it starts it."""

from __future__ import annotations

from typing import Any, cast

import pytest

from rollout.engines.base import Engine, EngineStats
from rollout.observe.timeseries import EngineCounters, TimeseriesSampler


class BookedAhead:
    """An engine whose busy seconds are set by the test (the sampler reads only `stats`)."""

    name = "e0"

    def __init__(self) -> None:
        self.busy_s = 0.0

    def stats(self) -> EngineStats:
        return EngineStats(0, 0, 8, 0, 100, extra={"busy_s": self.busy_s})


def _sampler(engine: BookedAhead) -> TimeseriesSampler:
    engines = cast(dict[str, Engine], {engine.name: engine})
    return TimeseriesSampler(engines, {engine.name: EngineCounters()}, start_s=0.0)


def test_a_forward_booked_ahead_of_the_clock_is_credited_over_the_intervals_it_spans() -> None:
    engine = BookedAhead()
    sampler = _sampler(engine)
    engine.busy_s = 2.5  # one 2.5 s forward, booked at t=0; then the engine idles until t=4
    busy: list[Any] = [sampler.sample(t)[0]["busy"] for t in (1.0, 2.0, 3.0, 4.0)]
    assert busy == [1.0, 1.0, 0.5, 0.0]
    assert sum(busy) / len(busy) == pytest.approx(engine.busy_s / 4.0)


def test_busy_samples_stay_within_0_and_1() -> None:
    engine = BookedAhead()
    sampler = _sampler(engine)
    readings = []
    for t, booked in ((0.5, 3.0), (1.0, 3.0), (1.5, 3.2), (6.0, 3.2)):
        engine.busy_s = booked
        readings.append(sampler.sample(t)[0]["busy"])
    assert all(0.0 <= value <= 1.0 for value in readings)
    assert sum(r * dt for r, dt in zip(readings, (0.5, 0.5, 0.5, 4.5), strict=True)) == (
        pytest.approx(3.2)
    )
