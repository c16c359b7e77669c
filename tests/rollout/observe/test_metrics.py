"""Spec of the rollout metrics: hand-built runs whose T_next, E_rollout, busy fraction, hit rates
and staleness are worked out by hand in each test."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from harness.events import Phase, StepEvent
from rollout.observe.engine_metrics import engine_timelines, kv_cache_stats
from rollout.observe.metrics import (
    MetricsError,
    compute_run_metrics,
    format_value,
    run_start_s,
    staleness_histogram,
    step_timings,
)
from rollout.observe.phase_metrics import (
    phase_totals,
    phase_totals_from_trajectories,
    sample_timelines,
)
from rollout.observe.run_records import StepRecord, TimeseriesSample
from tests.rollout.trajectory_factory import make_trajectory


def step(number: int, t_s: float, groups: Sequence[str] = ("g",), **fields: object) -> StepRecord:
    return StepRecord(step=number, t_s=t_s, groups=tuple(groups), **fields)  # type: ignore[arg-type]


def engine_sample(t_s: float, engine: str = "e0", **fields: float) -> TimeseriesSample:
    values: dict[str, float] = {
        "running": 0,
        "waiting": 0,
        "max_running": 4,
        "busy": 0.0,
        "kv_used_tokens": 0.0,
        "kv_capacity_tokens": 1000.0,
        "kv_device_hits": 0.0,
        "kv_host_hits": 0.0,
        "kv_misses": 0.0,
        "recomputed_tokens": 0.0,
    }
    values.update(fields)
    return TimeseriesSample.from_dict({"t_s": t_s, "engine": engine, **values})


def event(
    phase: Phase, start_s: float, end_s: float, sample: str = "s1", group: str = "g"
) -> StepEvent:
    return StepEvent(phase, start_s, end_s, sample, group)


# -- T_next -----------------------------------------------------------------------------------


def test_t_next_is_the_time_between_consecutive_batch_completions() -> None:
    timings = step_timings([step(1, 10.0), step(2, 25.0), step(3, 27.0)], start_s=0.0)

    assert [t.t_next_s for t in timings] == [10.0, 15.0, 2.0]


def test_t_next_of_step_one_is_measured_from_the_first_event() -> None:
    events = [event(Phase.PRE_GEN, 100.0, 101.0), event(Phase.GEN, 101.0, 104.0)]

    metrics = compute_run_metrics([step(1, 130.0)], events)

    assert metrics.steps[0].t_next_s == 30.0
    assert metrics.steps[0].completed_s == 30.0


def test_run_start_is_zero_without_events_or_engine_samples() -> None:
    assert run_start_s() == 0.0


def test_run_start_is_the_earliest_event_or_engine_sample() -> None:
    assert run_start_s([event(Phase.GEN, 7.0, 8.0)], [engine_sample(5.0)]) == 5.0


def test_mean_t_next_averages_the_steps() -> None:
    metrics = compute_run_metrics([step(1, 10.0), step(2, 25.0), step(3, 27.0)])

    assert metrics.mean_t_next_s == pytest.approx(9.0)
    assert metrics.max_t_next_s == 15.0


def test_steps_are_ordered_by_step_number_not_file_order() -> None:
    timings = step_timings([step(2, 25.0), step(1, 10.0)], start_s=0.0)

    assert [(t.step, t.t_next_s) for t in timings] == [(1, 10.0), (2, 15.0)]


def test_no_steps_is_an_error_that_names_steps_jsonl() -> None:
    with pytest.raises(MetricsError, match=r"steps\.jsonl"):
        compute_run_metrics([])


def test_a_batch_completing_before_the_previous_one_is_an_error() -> None:
    with pytest.raises(MetricsError, match="one clock"):
        step_timings([step(1, 10.0), step(2, 5.0)], start_s=0.0)


def test_a_step_recorded_twice_is_an_error() -> None:
    with pytest.raises(MetricsError, match="twice"):
        step_timings([step(1, 10.0), step(1, 12.0)], start_s=0.0)


# -- phases and E_rollout ---------------------------------------------------------------------

TWO_SAMPLES = [
    # s1: pre_gen 1 + gen 3 + pre_act 1 + act 4 = 9 s, of which 7 s useful.
    event(Phase.ENV_INIT, 0.0, 2.0, "s1"),
    event(Phase.PRE_GEN, 0.0, 1.0, "s1"),
    event(Phase.GEN, 1.0, 4.0, "s1"),
    event(Phase.PRE_ACT, 4.0, 5.0, "s1"),
    event(Phase.ACT, 5.0, 9.0, "s1"),
    # s2: pre_gen 3 + gen 2 = 5 s, of which 2 s useful.
    event(Phase.PRE_GEN, 0.0, 3.0, "s2"),
    event(Phase.GEN, 3.0, 5.0, "s2"),
    # A warm container started for nobody: not sample time.
    StepEvent(Phase.ENV_INIT, 0.0, 50.0),
]


def test_e_rollout_is_useful_time_over_sample_time_across_samples() -> None:
    totals = phase_totals(TWO_SAMPLES)

    assert totals.e_rollout == pytest.approx((7 + 2) / (9 + 5))


def test_env_init_is_not_part_of_sample_time() -> None:
    totals = phase_totals(TWO_SAMPLES)

    assert totals.sample_time_s == pytest.approx(14.0)
    assert totals.env_init_s == pytest.approx(2.0)


def test_pre_gen_share_and_mean_per_turn() -> None:
    totals = phase_totals(TWO_SAMPLES)

    assert totals.pre_gen_s == pytest.approx(4.0)
    assert totals.turns == 2
    assert totals.mean_per_turn_s(Phase.PRE_GEN) == pytest.approx(2.0)
    assert totals.share(Phase.PRE_GEN) == pytest.approx(4.0 / 14.0)


def test_env_time_share_is_act_time_over_sample_time() -> None:
    metrics = compute_run_metrics([step(1, 9.0)], TWO_SAMPLES)

    row = {r.key: r for r in metrics.summary_rows()}["env_time_share"]
    assert row.value == pytest.approx(4.0 / 14.0)


def test_a_preempted_generation_that_resumes_is_still_one_turn() -> None:
    events = [
        event(Phase.GEN, 0.0, 1.0),
        event(Phase.PREEMPT, 1.0, 1.0),
        event(Phase.PRE_GEN, 1.0, 3.0),
        event(Phase.GEN, 3.0, 4.0),
    ]

    assert phase_totals(events).turns == 1


def test_e_rollout_is_undefined_without_sample_time() -> None:
    assert phase_totals([]).e_rollout is None


def test_phase_totals_from_trajectories_use_their_turn_timings() -> None:
    # make_trajectory: every turn generates for 0.5 s; all but the last run a 0.25 s tool.
    totals = phase_totals_from_trajectories([make_trajectory(turns=3)])

    assert (totals.gen_s, totals.act_s, totals.turns, totals.samples) == (1.5, 0.5, 3, 1)


def test_without_events_phases_come_from_the_trajectories() -> None:
    metrics = compute_run_metrics([step(1, 5.0)], trajectories=[make_trajectory(turns=2)])

    assert metrics.e_rollout == pytest.approx(1.0)
    assert metrics.phases.turns == 2


def test_phases_per_step_cover_only_the_samples_of_that_steps_groups() -> None:
    events = [
        event(Phase.GEN, 0.0, 2.0, "a1", "ga"),
        event(Phase.GEN, 0.0, 5.0, "b1", "gb"),
        event(Phase.PRE_GEN, 5.0, 6.0, "b1", "gb"),
    ]

    metrics = compute_run_metrics([step(1, 2.0, ["ga"]), step(2, 6.0, ["gb"])], events)

    assert [p.gen_s for p in metrics.step_phases] == [2.0, 5.0]
    assert [p.pre_gen_s for p in metrics.step_phases] == [0.0, 1.0]


# -- counts and reward ------------------------------------------------------------------------


def test_preemptions_interruptions_and_infra_errors_are_counted_from_events() -> None:
    events = [
        event(Phase.PREEMPT, 1.0, 1.0),
        event(Phase.PREEMPT, 2.0, 2.0),
        event(Phase.INTERRUPT, 3.0, 3.0),
        event(Phase.INFRA_ERROR, 3.0, 4.0, "s2"),
    ]

    metrics = compute_run_metrics([step(1, 5.0)], events)

    assert (metrics.preemptions, metrics.interruptions, metrics.infra_errors) == (2, 1, 1)


def test_without_events_counts_come_from_the_trajectories() -> None:
    trajectories = [
        make_trajectory(index=0),
        make_trajectory(index=1, reward=None, infra_error="sandbox_dead"),
    ]

    metrics = compute_run_metrics([step(1, 5.0)], trajectories=trajectories)

    assert metrics.infra_errors == 1


def test_reward_mean_skips_samples_with_an_infra_error() -> None:
    trajectories = [
        make_trajectory(index=0, reward=1.0),
        make_trajectory(index=1, reward=0.0),
        make_trajectory(index=2, reward=0.0, infra_error="sandbox_dead"),
    ]

    metrics = compute_run_metrics([step(1, 5.0)], trajectories=trajectories)

    assert metrics.reward_mean == pytest.approx(0.5)


def test_reward_mean_falls_back_to_the_steps_weighted_by_groups() -> None:
    steps = [
        step(1, 1.0, ["a"], rewards_mean=1.0),
        step(2, 2.0, ["b", "c", "d"], rewards_mean=0.0),
    ]

    assert compute_run_metrics(steps).reward_mean == pytest.approx(0.25)


# -- staleness --------------------------------------------------------------------------------


def test_staleness_histogram_counts_consumed_groups_per_staleness() -> None:
    steps = [
        step(1, 1.0, ["a", "b", "c"], staleness=(0, 0, 1)),
        step(2, 2.0, ["d", "e"], staleness=(1, 2)),
    ]

    assert staleness_histogram(steps) == ((0, 2), (1, 2), (2, 1))
    metrics = compute_run_metrics(steps)
    assert metrics.mean_staleness == pytest.approx(0.8)
    assert metrics.max_staleness == 2


# -- engines ----------------------------------------------------------------------------------


def test_busy_fraction_is_the_mean_sample_per_engine_then_over_engines() -> None:
    samples = [engine_sample(float(t), "a", busy=b) for t, b in enumerate([1, 0, 1, 1])]
    samples += [engine_sample(float(t), "b", busy=0.5) for t in range(2)]

    metrics = compute_run_metrics([step(1, 4.0)], timeseries=samples)

    assert [e.busy_fraction for e in metrics.engines] == [0.75, 0.5]
    assert metrics.busy_fraction == pytest.approx(0.625)


def test_hit_rates_come_from_the_last_cumulative_counters_of_every_engine() -> None:
    samples = [
        engine_sample(2.0, "a", kv_device_hits=600, kv_host_hits=200, kv_misses=200),
        engine_sample(1.0, "a", kv_device_hits=100, kv_host_hits=0, kv_misses=900),
        engine_sample(2.0, "b", kv_misses=1000, recomputed_tokens=300),
    ]

    kv = kv_cache_stats(samples)

    assert kv is not None
    assert (kv.device_hit_rate, kv.host_hit_rate, kv.miss_rate) == pytest.approx((0.3, 0.1, 0.6))
    assert kv.recomputed_tokens == 300


def test_cumulative_hit_rate_over_time_is_undefined_before_the_first_lookup() -> None:
    samples = [engine_sample(0.0), engine_sample(1.0, kv_device_hits=30, kv_misses=10)]

    (timeline,) = engine_timelines(samples, start_s=0.0)

    assert math.isnan(timeline.hit_rate[0])
    assert timeline.hit_rate[1] == pytest.approx(0.75)


def test_kv_occupancy_is_used_over_capacity_and_skips_engines_without_capacity() -> None:
    samples = [
        engine_sample(0.0, "a", kv_used_tokens=250),
        engine_sample(1.0, "a", kv_used_tokens=750),
        engine_sample(0.0, "b", kv_capacity_tokens=0),
    ]

    metrics = compute_run_metrics([step(1, 2.0)], timeseries=samples)

    assert metrics.engines[0].kv_occupancy == (0.25, 0.75)
    assert metrics.mean_kv_occupancy == pytest.approx(0.5)
    assert metrics.peak_kv_occupancy == pytest.approx(0.75)


def test_engine_timelines_are_in_seconds_since_run_start_and_sorted_by_time() -> None:
    samples = [engine_sample(12.0, busy=1.0), engine_sample(11.0, busy=0.0)]

    (timeline,) = engine_timelines(samples, start_s=10.0)

    assert timeline.t_s == (1.0, 2.0)
    assert timeline.busy == (0.0, 1.0)


# -- summary ----------------------------------------------------------------------------------


def test_a_run_with_only_steps_still_gets_t_next_and_marks_the_rest_not_measured() -> None:
    metrics = compute_run_metrics([step(1, 4.0)])

    rows = {row.key: row for row in metrics.summary_rows()}
    assert rows["mean_t_next_s"].value == 4.0
    assert rows["busy_fraction"].text == "n/a"
    assert rows["kv_device_hit_rate"].text == "n/a"
    assert metrics.inputs == ("steps",)


def test_summary_row_keys_are_unique() -> None:
    samples = [engine_sample(0.0, "a"), engine_sample(0.0, "b")]
    metrics = compute_run_metrics([step(1, 1.0)], TWO_SAMPLES, samples)

    keys = [row.key for row in metrics.summary_rows()]

    assert len(keys) == len(set(keys))
    assert "busy_fraction[a]" in keys


def test_metrics_dict_has_no_nan_values() -> None:
    metrics = compute_run_metrics([step(1, 1.0)], timeseries=[engine_sample(0.0)])

    summary = metrics.to_dict()["summary"]

    assert all(value is None or math.isfinite(value) for value in summary.values())


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0.1234, "fraction", "12.3%"),
        (12345.0, "tokens", "12,345"),
        (3.14159, "s", "3.14 s"),
        (None, "s", "n/a"),
        (math.nan, "fraction", "n/a"),
        (0.8, "steps", "0.8 steps"),
    ],
)
def test_format_value_shows_units(value: float | None, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


# -- per-sample timelines ---------------------------------------------------------------------


def test_sample_timelines_keep_the_first_samples_by_start_time() -> None:
    events = [
        event(Phase.GEN, 5.0, 6.0, "late"),
        event(Phase.GEN, 1.0, 2.0, "early"),
        event(Phase.GEN, 3.0, 4.0, "middle"),
        event(Phase.PRE_GEN, 0.5, 1.0, "early"),
    ]

    timelines = sample_timelines(events, start_s=0.5, max_samples=2)

    assert [t.sample_id for t in timelines] == ["early", "middle"]
    assert [(s.phase, s.start_s) for s in timelines[0].spans] == [
        (Phase.PRE_GEN, 0.0),
        (Phase.GEN, 0.5),
    ]


def test_kv_traffic_between_tiers_sums_the_last_counters_of_every_engine() -> None:
    samples = [
        engine_sample(1.0, "a", kv_offloads=1, kv_d2h_bytes=10.0),
        engine_sample(
            2.0,
            "a",
            kv_offloads=4,
            kv_prefetches=3,
            kv_prefetches_in_time=2,
            kv_d2h_bytes=400.0,
            kv_h2d_bytes=300.0,
        ),
        engine_sample(2.0, "b", kv_offloads=1, kv_h2d_bytes=50.0),
    ]

    kv = kv_cache_stats(samples)

    assert kv is not None
    assert (kv.offloads, kv.prefetches, kv.prefetches_in_time) == (5, 3, 2)
    assert (kv.d2h_bytes, kv.h2d_bytes) == (400.0, 350.0)


def test_held_samples_are_the_steps_sample_seconds_over_the_time_to_the_last_batch() -> None:
    steps = [
        step(1, 4.0, held_sample_s={"kv_room": 6.0, "slot": 2.0}),
        step(2, 10.0, held_sample_s={"kv_room": 12.0}),
    ]
    rows = {row.key: row for row in compute_run_metrics(steps, start_s=0.0).summary_rows()}

    assert rows["mean_held_samples"].value == pytest.approx(20.0 / 10.0)
    assert rows["held_share[kv_room]"].value == pytest.approx(0.9)
    assert rows["held_share[slot]"].value == pytest.approx(0.1)
    assert rows["held_share[live_set]"].value == 0.0
    assert rows["held_share[kv_room]"].text == "90.0%"


def test_a_run_that_did_not_record_held_samples_says_not_measured() -> None:
    rows = {row.key: row for row in compute_run_metrics([step(1, 2.0)]).summary_rows()}

    assert rows["mean_held_samples"].text == "n/a"
    assert rows["held_share[slot]"].value is None


def test_kv_traffic_appears_in_the_summary_rows() -> None:
    samples = [engine_sample(1.0, kv_offloads=7, kv_h2d_bytes=2e9)]

    rows = {
        row.key: row
        for row in compute_run_metrics([step(1, 2.0)], timeseries=samples).summary_rows()
    }

    assert rows["kv_offloads"].value == 7
    assert format_value(rows["kv_h2d_bytes"].value, rows["kv_h2d_bytes"].unit) == "2.00 GB"
