"""Pure deadline decisions: phases, which stragglers to truncate, what to cancel, short steps."""

from __future__ import annotations

import pytest

from rollout.core.deadline import (
    DeadlinePhase,
    GroupProgress,
    StepDeadline,
    deadline_phase,
    plan_truncation,
    proceeds_short,
)


@pytest.mark.parametrize(
    ("now_s", "phase"),
    [
        (0.0, DeadlinePhase.BEFORE),
        (7.9, DeadlinePhase.BEFORE),
        (8.0, DeadlinePhase.TRUNCATE),
        (9.99, DeadlinePhase.TRUNCATE),
        (10.0, DeadlinePhase.PAST),
        (50.0, DeadlinePhase.PAST),
    ],
)
def test_the_phase_turns_at_the_margin_and_at_the_deadline(
    now_s: float, phase: DeadlinePhase
) -> None:
    assert deadline_phase(now_s, deadline_s=10.0, margin_s=2.0) is phase


def test_without_a_margin_truncation_waits_for_the_deadline() -> None:
    assert deadline_phase(9.99, 10.0, 0.0) is DeadlinePhase.BEFORE
    assert deadline_phase(10.0, 10.0, 0.0) is DeadlinePhase.PAST


def test_the_groups_closest_to_completion_are_truncated_and_the_rest_cancelled() -> None:
    groups = [
        # two samples not even started: truncation cannot complete it
        GroupProgress("far", 4, done=1, running=("far/0",), generating=frozenset({"far/0"})),
        # one straggler generating: the cheapest to complete
        GroupProgress(
            "near", 4, done=3, running=("near/3",), generating=frozenset({"near/3"}), order=2
        ),
        # two stragglers, one in a tool call
        GroupProgress(
            "mid",
            4,
            done=2,
            running=("mid/1", "mid/2"),
            generating=frozenset({"mid/2"}),
            order=1,
        ),
    ]
    plan = plan_truncation(groups, needed=2)
    assert plan.chosen == ("near", "mid")
    assert plan.truncate == ("near/3", "mid/1", "mid/2")
    assert plan.cancel == ("far/0",)  # a generation of a group this step will not take


def test_ties_go_to_the_oldest_group() -> None:
    young = GroupProgress("young", 2, done=1, running=("young/1",), order=5)
    old = GroupProgress("old", 2, done=1, running=("old/1",), order=1)
    assert plan_truncation([young, old], needed=1).chosen == ("old",)


def test_a_step_that_has_its_groups_plans_nothing() -> None:
    group = GroupProgress("g", 2, done=1, running=("g/1",), generating=frozenset({"g/1"}))
    plan = plan_truncation([group], needed=0)
    assert plan.truncate == () and plan.cancel == () and plan.chosen == ()


def test_samples_in_a_tool_call_are_truncated_but_never_cancelled() -> None:
    acting = GroupProgress("a", 2, done=0, running=("a/0", "a/1"))
    assert plan_truncation([acting], needed=1).truncate == ("a/0", "a/1")
    other = GroupProgress("b", 3, done=0, running=("b/0",))
    assert plan_truncation([acting, other], needed=1).cancel == ()


def test_unstarted_samples_are_counted() -> None:
    assert GroupProgress("g", 5, done=1, running=("g/1", "g/2")).unstarted == 2


@pytest.mark.parametrize(
    ("phase", "ready", "proceed", "short"),
    [
        (DeadlinePhase.PAST, 1, True, True),
        (DeadlinePhase.PAST, 0, True, False),  # nothing to hand over: it waits
        (DeadlinePhase.PAST, 1, False, False),  # a `wait` step waits
        (DeadlinePhase.TRUNCATE, 1, True, False),  # not yet
        (DeadlinePhase.PAST, 2, True, False),  # a full batch is not short
    ],
)
def test_only_a_proceed_step_past_its_deadline_goes_short(
    phase: DeadlinePhase, ready: int, proceed: bool, short: bool
) -> None:
    assert proceeds_short(phase, ready, wanted=2, proceed=proceed) is short


def test_the_step_outcome_is_a_plain_record() -> None:
    outcome = StepDeadline(budget_s=30.0, hit=True, truncated=2, groups=1, wanted=2, short=True)
    assert outcome.to_dict() == {
        "budget_s": 30.0,
        "hit": True,
        "truncated": 2,
        "cancelled": 0,
        "groups": 1,
        "wanted": 2,
        "short": True,
    }
