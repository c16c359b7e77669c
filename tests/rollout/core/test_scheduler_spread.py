"""Spec of the data-parallel rule (`SchedulerConfig.critical_spread`, DESIGN.md §7).

With N engines, an engine takes a new critical sample only while it generates fewer critical
samples than its share, ceil(live critical samples / N), so critical groups spread over the
engines instead of queueing on one. Groups named "H…" are critical.
"""

from __future__ import annotations

from collections import Counter

import pytest

from rollout.core.config import SchedulerConfig
from rollout.core.priority import PriorityAssignment
from rollout.core.scheduler import (
    EngineAdded,
    EngineLoad,
    PrioritiesChanged,
    RolloutScheduler,
    SampleAdmitted,
    StartGeneration,
)


def world(slots: dict[str, int], *, spread: bool, critical: dict[str, int]) -> RolloutScheduler:
    """Engines with these slots; `critical` maps each critical group to its unfinished samples."""
    scheduler = RolloutScheduler(
        SchedulerConfig(critical_spread=spread, low_priority_kv_watermark=0.0)
    )
    for name, count in slots.items():
        scheduler.handle(EngineAdded(name, EngineLoad(max_running_requests=count, kv_headroom=1.0)))
    assignment = PriorityAssignment(
        critical=frozenset(critical), critical_samples=sum(critical.values())
    )
    scheduler.handle(PrioritiesChanged(assignment))
    return scheduler


def admit_all(scheduler: RolloutScheduler, groups: dict[str, int]) -> dict[str, str]:
    """Admit every sample of `groups` (group -> size) in order; returns sample -> engine."""
    placed: dict[str, str] = {}
    for group_id, size in groups.items():
        for index in range(size):
            for decision in scheduler.handle(SampleAdmitted(f"{group_id}-s{index}", group_id)):
                if isinstance(decision, StartGeneration):
                    placed[decision.sample_id] = decision.engine
    return placed


FOUR_GROUPS = {"HA": 2, "HB": 2, "HC": 2, "HD": 2}
ONE_BIG_ENGINE = {"e0": 16, "e1": 4, "e2": 4, "e3": 4}


def test_critical_groups_pile_onto_the_engine_with_most_free_slots_without_the_rule() -> None:
    """The problem the rule solves: every critical sample lands on e0."""
    scheduler = world(ONE_BIG_ENGINE, spread=False, critical=FOUR_GROUPS)
    placed = admit_all(scheduler, FOUR_GROUPS)
    assert Counter(placed.values()) == {"e0": 8}


def test_critical_groups_spread_over_four_engines_with_the_rule() -> None:
    """8 critical samples on 4 engines: a share of 2 each, whole groups kept together."""
    scheduler = world(ONE_BIG_ENGINE, spread=True, critical=FOUR_GROUPS)
    placed = admit_all(scheduler, FOUR_GROUPS)
    assert Counter(placed.values()) == {"e0": 2, "e1": 2, "e2": 2, "e3": 2}
    for group_id in FOUR_GROUPS:
        assert placed[f"{group_id}-s0"] == placed[f"{group_id}-s1"], group_id


def test_siblings_prefer_their_groups_engine_while_it_is_under_its_share() -> None:
    """Share ceil(8 / 2) = 4: all four siblings of HA join HA's engine, HB gets the other."""
    scheduler = world({"e0": 8, "e1": 8}, spread=True, critical={"HA": 4, "HB": 4})
    placed = admit_all(scheduler, {"HA": 4, "HB": 4})
    assert {placed[f"HA-s{i}"] for i in range(4)} == {"e0"}
    assert {placed[f"HB-s{i}"] for i in range(4)} == {"e1"}


def test_a_sibling_goes_elsewhere_once_its_groups_engine_has_its_share() -> None:
    """Share ceil(3 / 3) = 1: the group's engine is at its share after the first sibling."""
    scheduler = world({"e0": 8, "e1": 4, "e2": 4}, spread=True, critical={"HA": 3})
    placed = admit_all(scheduler, {"HA": 3})
    assert sorted(placed.values()) == ["e0", "e1", "e2"]


def test_a_free_slot_never_idles_while_critical_work_waits() -> None:
    """Share 2, e1 full and e0 at its share: the fourth sample still starts on e0."""
    scheduler = world({"e0": 4, "e1": 1}, spread=True, critical={"HA": 4})
    placed = admit_all(scheduler, {"HA": 4})
    assert Counter(placed.values()) == {"e0": 3, "e1": 1}


def test_low_priority_samples_are_placed_as_before() -> None:
    """The rule is about critical work: low-priority groups still fill the emptiest engine."""
    groups = {"LA": 2, "LB": 2}
    with_rule = admit_all(world(ONE_BIG_ENGINE, spread=True, critical={}), groups)
    without = admit_all(world(ONE_BIG_ENGINE, spread=False, critical={}), groups)
    assert with_rule == without


@pytest.mark.parametrize("slots", [1, 3, 16])
def test_with_one_engine_the_rule_changes_nothing(slots: int) -> None:
    groups = {"HA": 4, "LB": 4, "HC": 4}
    with_rule = admit_all(world({"e0": slots}, spread=True, critical={"HA": 4, "HC": 4}), groups)
    without = admit_all(world({"e0": slots}, spread=False, critical={"HA": 4, "HC": 4}), groups)
    assert with_rule == without
