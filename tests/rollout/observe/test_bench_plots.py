"""The bench's comparison figures: engine samples pooled per time, the counter-example test."""

from __future__ import annotations

import math

from rollout.observe.bench_plots import (
    THROUGHPUTS,
    BenchFigureConfig,
    PolicyTrace,
    counter_examples,
    policy_trace,
    write_bench_figures,
)
from rollout.observe.phase_metrics import PhaseTotals
from rollout.observe.run_records import StepRecord, TimeseriesSample


def sample(t_s: float, engine: str, busy: float, used: float, **extra: float) -> TimeseriesSample:
    return TimeseriesSample(
        t_s=t_s,
        engine=engine,
        running=1,
        waiting=0,
        max_running=8,
        busy=busy,
        kv_used_tokens=used,
        kv_capacity_tokens=100.0,
        kv_device_hits=30.0 * t_s,
        kv_host_hits=10.0 * t_s,
        kv_misses=60.0 * t_s,
        recomputed_tokens=0.0,
        extra=extra,
    )


def trace(policy: str, tokens_per_s: float | None, t_next_s: float) -> PolicyTrace:
    return PolicyTrace(
        policy=policy,
        completed_s=(t_next_s,),
        mean_t_next_s=t_next_s,
        phases=PhaseTotals(gen_s=3.0, act_s=1.0, samples=1, turns=1),
        t_s=(0.0, 1.0),
        busy=(0.5, 1.0),
        device_occupancy=(0.1, 0.2),
        host_occupancy=(math.nan, math.nan),
        hit_rate=(math.nan, 0.5),
        generated_tokens_per_s=tokens_per_s,
        computed_tokens_per_s=None if tokens_per_s is None else 2 * tokens_per_s,
    )


def test_engines_are_pooled_at_each_sample_time_and_throughput_is_the_last_count_over_time() -> (
    None
):
    host = {"kv_host_used_tokens": 50.0, "kv_host_capacity_tokens": 200.0}
    timeseries = [
        sample(0.0, "a", 0.0, 10.0, generated_tokens=0.0, **host),
        sample(0.0, "b", 1.0, 30.0, generated_tokens=0.0),
        sample(10.0, "a", 1.0, 50.0, generated_tokens=300.0, **host),
        sample(10.0, "b", 0.5, 70.0, generated_tokens=100.0),
    ]
    steps = [StepRecord(step=1, t_s=6.0, groups=("g0",))]
    pooled = policy_trace("ours", steps, [], timeseries)
    assert pooled.t_s == (0.0, 10.0)
    assert pooled.busy == (0.5, 0.75)  # the mean over engines
    assert pooled.device_occupancy == (0.2, 0.6)  # Σ used ÷ Σ capacity
    assert pooled.host_occupancy == (0.25, 0.25)  # only engine a has a host tier
    assert math.isnan(pooled.hit_rate[0]) and pooled.hit_rate[1] == 0.4
    assert pooled.generated_tokens_per_s == 40.0  # (300 + 100) tokens in 10 s
    assert pooled.computed_tokens_per_s == 40.0 + 120.0  # and (600 + 600) misses prefilled
    assert pooled.completed_s == (6.0,) and pooled.mean_t_next_s == 6.0


def test_a_counter_example_has_more_tokens_per_second_than_ours_and_a_longer_t_next() -> None:
    traces = [
        trace("ours", 100.0, 50.0),
        trace("busier_but_slower", 120.0, 60.0),
        trace("slower_and_idle", 80.0, 70.0),
        trace("busier_and_faster", 130.0, 40.0),
        trace("unknown", None, 90.0),
    ]
    for _, pick in THROUGHPUTS:
        assert counter_examples(traces, pick) == ["busier_but_slower"]
        assert counter_examples([trace("ours", None, 50.0), trace("x", 200.0, 90.0)], pick) == []


def test_the_four_figures_are_written_as_png_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    traces = [trace("ours", 100.0, 50.0), trace("other", 120.0, 60.0)]
    written = write_bench_figures(traces, tmp_path, BenchFigureConfig(), "cell, seed 0")
    assert sorted(path.name for path in written.values()) == [
        "busy.png",
        "env_share.png",
        "kv.png",
        "throughput.png",
    ]
    for path in written.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
