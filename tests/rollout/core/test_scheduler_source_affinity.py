"""Spec of prefix-aware placement by task source (`SchedulerConfig.source_affinity`).

A new, non-critical sample whose group has no engine yet prefers the engines where samples of
its task source are live (their shared system prompt is cached there): a tie-break among the
engines with a free slot, never a wait, and critical samples are placed as without it.
"""

from __future__ import annotations

from rollout.core.config import SchedulerConfig
from rollout.core.priority import PriorityAssignment
from rollout.core.scheduler import (
    EngineAdded,
    EngineLoad,
    PrioritiesChanged,
    RolloutScheduler,
    SampleAdmitted,
    SampleFinished,
    StartGeneration,
)


def world(
    slots: dict[str, int], *, affinity: bool, critical: frozenset[str] = frozenset()
) -> RolloutScheduler:
    scheduler = RolloutScheduler(
        SchedulerConfig(source_affinity=affinity, low_priority_kv_watermark=0.0)
    )
    for name, count in slots.items():
        scheduler.handle(EngineAdded(name, EngineLoad(max_running_requests=count, kv_headroom=1.0)))
    if critical:
        scheduler.handle(PrioritiesChanged(PriorityAssignment(critical=critical)))
    return scheduler


def admit(scheduler: RolloutScheduler, sample_id: str, group_id: str, source: str) -> str | None:
    """Admit one sample; the engine it started on at once, or None (it waits)."""
    for decision in scheduler.handle(SampleAdmitted(sample_id, group_id, source=source)):
        if isinstance(decision, StartGeneration) and decision.sample_id == sample_id:
            return decision.engine
    return None


# Groups of one sample each from two sources, two by two (as a weighted mix may admit them).
MIX = [(f"g{i}", "swe" if i % 4 < 2 else "math") for i in range(8)]


def engines_per_source(affinity: bool) -> dict[str, set[str]]:
    scheduler = world({"e0": 8, "e1": 8}, affinity=affinity)
    used: dict[str, set[str]] = {}
    for group_id, source in MIX:
        engine = admit(scheduler, f"{group_id}-s0", group_id, source)
        assert engine is not None  # never a wait: a slot is free
        used.setdefault(source, set()).add(engine)
    return used


def test_without_the_rule_each_sources_groups_spread_over_both_engines() -> None:
    assert engines_per_source(affinity=False) == {"swe": {"e0", "e1"}, "math": {"e0", "e1"}}


def test_with_the_rule_each_source_stays_on_the_engine_that_holds_its_prefix() -> None:
    used = engines_per_source(affinity=True)
    assert len(used["swe"]) == 1 and len(used["math"]) == 1 and used["swe"] != used["math"]


def test_a_full_warm_engine_never_makes_a_sample_wait() -> None:
    scheduler = world({"e0": 1, "e1": 4}, affinity=True)
    assert admit(scheduler, "a-s0", "a", "swe") == "e1"  # most free slots
    scheduler = world({"e0": 2, "e1": 2}, affinity=True)
    assert admit(scheduler, "a-s0", "a", "swe") == "e0"
    assert admit(scheduler, "b-s0", "b", "swe") == "e0"  # warm, with a free slot
    assert admit(scheduler, "c-s0", "c", "swe") == "e1"  # warm engine full: elsewhere, at once


def test_a_deadline_bound_sample_is_never_held_back_for_its_warm_engine() -> None:
    scheduler = world({"e0": 2, "e1": 2}, affinity=True, critical=frozenset({"h"}))
    assert admit(scheduler, "a-s0", "a", "swe") == "e0"
    assert admit(scheduler, "b-s0", "b", "math") == "e1"
    assert admit(scheduler, "c-s0", "c", "swe") == "e0"  # warm, with a free slot: e0 is full
    # the critical (deadline-bound) swe sample starts at once on the cold engine
    assert admit(scheduler, "h-s0", "h", "swe") == "e1"


def test_an_engine_stays_warm_after_its_source_samples_finish() -> None:
    scheduler = world({"e0": 4, "e1": 4}, affinity=True)
    assert admit(scheduler, "a-s0", "a", "swe") == "e0"
    assert admit(scheduler, "b-s0", "b", "math") == "e1"
    scheduler.handle(SampleFinished("a-s0"))
    assert admit(scheduler, "c-s0", "c", "math") == "e1"  # warm, though e0 has more free slots
    assert admit(scheduler, "d-s0", "d", "swe") == "e0"  # its prompt is still cached on e0
