"""Spec of critical groups: D(t) = B − ready, closure cost, and the staleness override."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout.core.config import AdmissionConfig, PriorityConfig
from rollout.core.predictors.base import RemainingWork
from rollout.core.priority import (
    CriticalGroupTracker,
    GroupStatus,
    OrderRanks,
    act_slot_key,
    assign_priorities,
    closure_cost_s,
    remaining_work_s,
)
from rollout.core.types import Group
from rollout.errors import SchedulerError

ADMISSION = AdmissionConfig(groups_per_step=2, group_size=2, async_factor=3)
PRIORITY = PriorityConfig(deadline_margin_steps=0)


def group(group_id: str, *work_s: float, step: int = 5, order: int = 0) -> GroupStatus:
    return GroupStatus(group_id, admitted_step=step, admission_order=order, remaining_work_s=work_s)


def assign(groups: list[GroupStatus], ready: int = 0, step: int = 5) -> frozenset[str]:
    result = assign_priorities(
        groups, ready_groups=ready, training_step=step, admission=ADMISSION, priority=PRIORITY
    )
    return result.critical


def test_closure_cost_is_the_largest_remaining_work_of_the_unfinished_samples() -> None:
    assert closure_cost_s([3.0, 40.0, 7.0]) == 40.0


def test_group_with_every_sample_finished_costs_nothing() -> None:
    assert closure_cost_s([]) == 0.0


def test_the_d_cheapest_groups_are_critical() -> None:
    groups = [group("a", 10, 50), group("b", 20, 20), group("c", 5, 90), group("d", 1, 1)]
    # closure costs: a=50, b=20, c=90, d=1; B=2 and nothing ready, so D=2
    assert assign(groups) == {"d", "b"}


def test_one_long_sample_makes_its_whole_group_expensive() -> None:
    groups = [group("many_short", 9, 9, 9), group("one_long", 1, 100)]
    assert assign(groups, ready=1) == {"many_short"}


def test_ready_groups_reduce_the_demand() -> None:
    groups = [group("a", 1), group("b", 2), group("c", 3)]
    assert assign(groups, ready=1) == {"a"}


def test_no_group_is_critical_once_the_batch_is_ready() -> None:
    assert assign([group("a", 1), group("b", 2)], ready=2) == frozenset()


def test_group_at_its_staleness_deadline_is_critical_regardless_of_cost() -> None:
    # admitted at step 3 with async_factor 3: step 5 is its last chance
    groups = [group("cheap", 1), group("cheaper", 0.5), group("old_and_costly", 999, step=3)]
    assert assign(groups, ready=1, step=5) == {"old_and_costly"}


def test_overdue_groups_take_their_share_of_the_demand_first() -> None:
    groups = [group("a", 1), group("b", 2), group("old", 999, step=3)]
    assert assign(groups, ready=0, step=5) == {"old", "a"}


def test_deadline_margin_makes_groups_critical_earlier() -> None:
    result = assign_priorities(
        [group("young", 999, step=4), group("cheap", 1)],
        ready_groups=1,
        training_step=5,
        admission=ADMISSION,
        priority=PriorityConfig(deadline_margin_steps=1),
    )
    assert result.critical == {"young"}


def test_equal_costs_are_broken_by_admission_order() -> None:
    groups = [group("late", 5, order=2), group("early", 5, order=1), group("mid", 5, order=3)]
    assert assign(groups, ready=1) == {"early"}


def test_ranks_put_critical_groups_first_then_cheapest() -> None:
    result = assign_priorities(
        [group("x", 30), group("y", 10), group("z", 20)],
        ready_groups=1,
        training_step=5,
        admission=ADMISSION,
        priority=PRIORITY,
    )
    assert sorted(result.ranks, key=result.rank) == ["y", "z", "x"]


def test_remaining_work_counts_turns_and_tokens_in_seconds() -> None:
    config = PriorityConfig(seconds_per_turn=2.0, seconds_per_gen_token=0.01)
    assert remaining_work_s(RemainingWork(turns=3, gen_tokens=500), config) == pytest.approx(11.0)


def test_act_slots_serve_critical_samples_first_then_rank_then_arrival() -> None:
    keys = {
        "low_early": act_slot_key(critical=False, group_rank=0, waiting_since_s=0.0, sample_id="a"),
        "high_late": act_slot_key(critical=True, group_rank=5, waiting_since_s=9.0, sample_id="b"),
        "high_ranked": act_slot_key(
            critical=True, group_rank=1, waiting_since_s=9.5, sample_id="c"
        ),
    }
    assert sorted(keys, key=keys.__getitem__) == ["high_ranked", "high_late", "low_early"]


class TestTracker:
    def tracker(self) -> CriticalGroupTracker:
        tracker = CriticalGroupTracker(ADMISSION, PRIORITY)
        for index, name in enumerate(("g1", "g2", "g3")):
            tracker.add_group(Group(name, prompt_index=index, size=2, admitted_step=5))
        return tracker

    def test_unpredicted_samples_count_as_infinitely_expensive(self) -> None:
        tracker = self.tracker()
        tracker.set_remaining("g1-a0-s0", 5.0)
        assert tracker.assignment(5).closure_costs_s["g1"] == math.inf

    def test_predictions_and_finished_samples_drive_the_choice(self) -> None:
        tracker = self.tracker()
        for sample_id, work in [("g1-a0-s0", 50), ("g1-a0-s1", 5), ("g2-a0-s0", 20)]:
            tracker.set_remaining(sample_id, work)
        tracker.set_remaining("g2-a0-s1", 30)
        tracker.set_remaining("g3-a0-s0", 10)
        tracker.sample_finished("g3-a0-s1")
        assert tracker.assignment(5).critical == {"g3", "g2"}

    def test_ready_group_leaves_the_candidates_and_lowers_the_demand(self) -> None:
        tracker = self.tracker()
        for sample_id in ("g1-a0-s0", "g1-a0-s1", "g2-a0-s0", "g2-a0-s1", "g3-a0-s0"):
            tracker.set_remaining(sample_id, 1.0)
        tracker.set_remaining("g3-a0-s1", 2.0)
        tracker.group_ready("g1")
        result = tracker.assignment(5)
        assert (result.demand, "g1" in result.ranks, result.critical) == (1, False, {"g2"})

    def test_consumed_group_is_forgotten(self) -> None:
        tracker = self.tracker()
        tracker.group_ready("g1")
        tracker.group_consumed("g1")
        assert (tracker.ready_groups, "g1" in tracker.assignment(5).ranks) == (0, False)


class TestTrackerMatchesAFreshComputation:
    """The tracker recomputes only when a closure cost changed; it must never return a stale
    assignment. Checked against `assign_priorities` on the exact inputs after every operation."""

    @staticmethod
    def fresh(tracker: CriticalGroupTracker, remaining: dict[str, dict[str, float]], step: int):
        groups = [
            group(group_id, *work.values(), order=index)
            for index, (group_id, work) in enumerate(remaining.items())
        ]
        return assign_priorities(
            groups,
            ready_groups=tracker.ready_groups,
            training_step=step,
            admission=ADMISSION,
            priority=PRIORITY,
        )

    @settings(max_examples=150, deadline=None)
    @given(
        st.lists(
            st.tuples(
                st.sampled_from(["set", "set", "set", "finish", "ready", "step"]),
                st.integers(0, 3),
                st.integers(0, 1),
                st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0]),
            ),
            max_size=40,
        )
    )
    def test_every_assignment_equals_assign_priorities_on_the_current_inputs(
        self, operations: list[tuple[str, int, int, float]]
    ) -> None:
        tracker = CriticalGroupTracker(ADMISSION, PRIORITY)
        names = [f"g{index}" for index in range(4)]
        remaining: dict[str, dict[str, float]] = {}
        for index, name in enumerate(names):
            tracker.add_group(Group(name, prompt_index=index, size=2, admitted_step=5))
            remaining[name] = {f"{name}-a0-s0": math.inf, f"{name}-a0-s1": math.inf}
        step = 5
        for kind, group_index, sample_index, work in operations:
            name = names[group_index]
            sample_id = f"{name}-a0-s{sample_index}"
            if kind == "step":
                step += 1
            elif name not in remaining:
                continue  # the group is ready: it left the candidates
            elif kind == "ready":
                tracker.group_ready(name)
                del remaining[name]
            elif sample_id in remaining[name]:
                if kind == "set":
                    tracker.set_remaining(sample_id, work)
                    remaining[name][sample_id] = work
                else:
                    tracker.sample_finished(sample_id)
                    del remaining[name][sample_id]
            got, expected = tracker.assignment(step), self.fresh(tracker, remaining, step)
            assert (got.critical, got.overdue, dict(got.ranks), dict(got.closure_costs_s)) == (
                expected.critical,
                expected.overdue,
                dict(expected.ranks),
                dict(expected.closure_costs_s),
            )


def test_a_window_lets_only_the_oldest_groups_compete_on_cost() -> None:
    groups = [
        group("old_dear", 90, order=0),
        group("old_cheap", 20, order=1),
        group("mid", 50, order=2),
        group("young_cheapest", 1, order=3),
    ]

    def critical(slack: int | None) -> frozenset[str]:
        return assign_priorities(
            groups,
            ready_groups=0,
            training_step=5,
            admission=ADMISSION,
            priority=PriorityConfig(deadline_margin_steps=0, window_slack_groups=slack),
        ).critical

    assert critical(None) == {"young_cheapest", "old_cheap"}  # cheapest anywhere
    assert critical(0) == {"old_dear", "old_cheap"}  # D = 2 oldest: FIFO
    assert critical(1) == {"old_cheap", "mid"}  # cheapest 2 of the oldest 3


@pytest.mark.parametrize(
    "priority",
    [PriorityConfig(window_slack_groups=1), PriorityConfig(deadline_margin_steps=1)],
    ids=["window", "margin"],
)
@settings(max_examples=100, deadline=None)
@given(
    operations=st.lists(
        st.tuples(
            st.sampled_from(["set", "set", "set", "finish", "ready", "step"]),
            st.integers(0, 5),
            st.integers(0, 1),
            st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0]),
        ),
        max_size=40,
    )
)
def test_the_incremental_tracker_equals_assign_priorities_with_windows_and_deadlines(
    priority: PriorityConfig, operations: list[tuple[str, int, int, float]]
) -> None:
    """Groups admitted at different steps, some overdue, a window: the kept indexes agree
    with a fresh `assign_priorities` after every change."""
    tracker = CriticalGroupTracker(ADMISSION, priority)
    steps = [4, 5, 5, 6, 4, 6]
    remaining: dict[str, dict[str, float]] = {}
    for index, admitted in enumerate(steps):
        name = f"g{index}"
        tracker.add_group(Group(name, prompt_index=index, size=2, admitted_step=admitted))
        remaining[name] = {f"{name}-a0-s0": math.inf, f"{name}-a0-s1": math.inf}
    step = 5
    for kind, group_index, sample_index, work in operations:
        name = f"g{group_index}"
        sample_id = f"{name}-a0-s{sample_index}"
        if kind == "step":
            step += 1
        elif name not in remaining:
            continue
        elif kind == "ready":
            tracker.group_ready(name)
            del remaining[name]
        elif sample_id in remaining[name]:
            if kind == "set":
                tracker.set_remaining(sample_id, work)
                remaining[name][sample_id] = work
            else:
                tracker.sample_finished(sample_id)
                del remaining[name][sample_id]
        statuses = [
            group(name, *work_s.values(), step=steps[int(name[1:])], order=int(name[1:]))
            for name, work_s in remaining.items()
        ]
        expected = assign_priorities(
            statuses,
            ready_groups=tracker.ready_groups,
            training_step=step,
            admission=ADMISSION,
            priority=priority,
        )
        got = tracker.assignment(step)
        assert (got.critical, got.overdue, dict(got.ranks), dict(got.closure_costs_s)) == (
            expected.critical,
            expected.overdue,
            dict(expected.ranks),
            dict(expected.closure_costs_s),
        )
        assert list(got.ranks) == list(expected.ranks)
        assert got.critical_samples == expected.critical_samples


def test_order_ranks_read_ranks_from_the_order_and_compare_by_it() -> None:
    ranks = OrderRanks(["b", "a", "c"])
    assert (ranks["a"], ranks.get("z"), list(ranks), "c" in ranks) == (
        1,
        None,
        ["b", "a", "c"],
        True,
    )
    assert ranks == OrderRanks(("b", "a", "c"))
    assert ranks != OrderRanks(["a", "b", "c"])
    assert ranks == {"b": 0, "a": 1, "c": 2}


def test_a_restarted_sample_has_work_again_and_takes_new_estimates() -> None:
    tracker = CriticalGroupTracker(ADMISSION, PRIORITY)
    tracker.add_group(Group("g0", prompt_index=0, size=2, admitted_step=5))
    for sample_id in ("g0-a0-s0", "g0-a0-s1"):
        tracker.set_remaining(sample_id, 3.0)
        tracker.sample_finished(sample_id)
    assert tracker.assignment(5).closure_costs_s["g0"] == 0.0
    with pytest.raises(SchedulerError):
        tracker.set_remaining("g0-a0-s1", 4.0)
    tracker.sample_restarted("g0-a0-s1")
    assert tracker.assignment(5).closure_costs_s["g0"] == math.inf
    tracker.set_remaining("g0-a0-s1", 4.0)
    assert tracker.assignment(5).closure_costs_s["g0"] == 4.0
