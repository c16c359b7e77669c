"""Spec for the scheduler health summary (issue 15)."""

from __future__ import annotations

from rollout.core.classes import PriorityClass
from rollout.core.scheduler_events import (
    ActFinished,
    Promote,
    SampleAdmitted,
    StartGeneration,
)
from rollout.observe.health import HealthTracker, percentile


def _start(sid: str) -> StartGeneration:
    return StartGeneration(sample_id=sid, engine="e0", high=False)


def test_wait_per_class_is_ready_to_start_time() -> None:
    h = HealthTracker()
    h.observe(SampleAdmitted("a", "g", now_s=0.0, priority_class=PriorityClass.URGENT))
    h.observe(SampleAdmitted("b", "g", now_s=0.0, priority_class=PriorityClass.LOW))
    h.observe(SampleAdmitted("c", "g", now_s=1.0), [_start("a")])
    h.observe(ActFinished("a", now_s=2.0), [_start("b"), _start("c")])
    h.observe(ActFinished("x", now_s=5.0), [_start("a")])
    s = h.summary()["wait_by_class"]
    assert isinstance(s, dict)
    assert s["urgent"] == {"count": 2, "mean_wait_s": 2.0, "p99_wait_s": 3.0}
    assert s["low"]["mean_wait_s"] == 2.0
    assert s["normal"]["mean_wait_s"] == 1.0


def test_starved_counts_waits_over_bound_else_promotions() -> None:
    h = HealthTracker(starvation_bound_s=1.5)
    h.observe(SampleAdmitted("a", "g", now_s=0.0))
    h.observe(SampleAdmitted("b", "g", now_s=0.0), [_start("b")])
    h.observe(ActFinished("z", now_s=2.0), [_start("a")])
    assert h.summary()["starved_requests"] == 1
    p = HealthTracker()
    p.observe(
        ActFinished("z", now_s=1.0),
        [Promote("a", PriorityClass.LOW, PriorityClass.NORMAL, waited_s=9.0)],
    )
    assert p.summary()["starved_requests"] == 1


def test_deadline_blocked_rates_and_prefix() -> None:
    h = HealthTracker()
    h.batch(requested_s=0.0, ready_s=2.0, deadline_s=1.0)
    h.batch(requested_s=2.0, ready_s=3.0, deadline_s=5.0)
    h.batch(requested_s=3.0, ready_s=3.0)
    h.observe(ActFinished("a", episode_done=True, now_s=0.0))
    h.observe(ActFinished("b", episode_done=True, now_s=4.0))
    h.consumed(1, now_s=4.0)
    h.engine_tokens(prompt_tokens=100, cached_prompt_tokens=25)
    s = h.summary()
    assert s["deadline_miss_rate"] == 1 / 3
    assert s["trainer_blocked_total_s"] == 3.0
    assert s["arrival_rate_per_s"] == 0.5
    assert s["consumption_rate_per_s"] == 0.25
    assert s["prefix_hit_rate"] == 0.25


def test_percentile_nearest_rank() -> None:
    assert percentile([], 99) == 0.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0


def test_a_wait_cut_by_promotions_is_not_starved_and_counts_under_its_source_class() -> None:
    low, normal = PriorityClass.LOW, PriorityClass.NORMAL
    h = HealthTracker(starvation_bound_s=1.5)
    h.observe(SampleAdmitted("a", "g", now_s=0.0, priority_class=low))
    h.observe(ActFinished("z", now_s=1.0), [Promote("a", low, normal, 1.0)])
    h.observe(ActFinished("z", now_s=2.0), [_start("a")])  # 2 s in all, 1 s at each class
    summary = h.summary()
    assert summary["starved_requests"] == 0 and summary["promotions"] == 1
    waits = summary["wait_by_class"]
    assert isinstance(waits, dict) and set(waits) == {"low"} and waits["low"]["count"] == 1
