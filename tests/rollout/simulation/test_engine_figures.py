"""Spec of the per-engine figures: each engine on its own, busy as the mean over engines."""

from __future__ import annotations

import pytest

from rollout.observe.timeseries import EngineCounters
from rollout.simulation.engine_figures import KVSampleLog, engine_figures, mean_busy_fraction
from rollout.simulation.setup import engine_names


def test_one_engine_keeps_its_name_and_several_are_numbered() -> None:
    assert engine_names("sim", 1) == ("sim",)
    assert engine_names("sim", 3) == ("sim-0", "sim-1", "sim-2")
    with pytest.raises(ValueError, match="at least one engine"):
        engine_names("sim", 0)


def test_each_engine_reports_its_busy_share_and_sampled_kv() -> None:
    log = KVSampleLog()
    for used in (10, 30, 20):
        log.record({"engine": "a", "kv_used_tokens": used})
    log.record({"engine": "b", "kv_used_tokens": 5})
    figures = engine_figures(
        {"a": 8.0, "b": 2.0},
        capacity_tokens={"a": 100, "b": 100},
        elapsed_s=10.0,
        counters={"a": EngineCounters(requests=3), "b": EngineCounters(requests=1)},
        kv=log,
    )
    a, b = figures
    assert (a.name, a.busy_fraction, a.kv_used_mean_tokens, a.kv_used_peak_tokens) == (
        "a", 0.8, 20.0, 30,
    )  # fmt: skip
    assert a.kv_peak_fraction == pytest.approx(0.3) and a.requests == 3
    assert (b.busy_fraction, b.kv_used_peak_tokens) == (0.2, 5)
    assert mean_busy_fraction(figures) == pytest.approx(0.5)


def test_an_engine_without_samples_reports_no_kv_rather_than_zero() -> None:
    (figure,) = engine_figures(
        {"a": 0.0}, capacity_tokens={"a": 64}, elapsed_s=0.0, counters={}, kv=KVSampleLog()
    )
    assert figure.kv_used_peak_tokens is None and figure.busy_fraction is None
    assert mean_busy_fraction([figure]) is None
