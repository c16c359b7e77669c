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
    request_deadline,
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


# -- per-request deadlines and holds ----------------------------------------------------------


@pytest.mark.parametrize(
    ("now_s", "expected"),
    [
        (0.0, 8.0),  # before the truncation point: due there (the step cuts it then anyway)
        (7.99, 8.0),
        (8.0, 10.0),  # within the window: a late start must not run past the deadline
        (9.5, 10.0),
        (10.0, None),  # past it: a `wait` step needs every token of its missing groups
        (30.0, None),
    ],
)
def test_a_request_is_due_at_the_truncation_point_then_at_the_deadline(
    now_s: float, expected: float | None
) -> None:
    assert request_deadline(now_s, 10.0, 2.0) == expected


def test_without_a_waiting_step_a_request_has_no_deadline() -> None:
    assert request_deadline(5.0, None, 2.0) is None


def test_without_a_margin_a_request_is_due_at_the_deadline() -> None:
    assert request_deadline(3.0, 10.0, 0.0) == 10.0


def test_cancels_are_held_while_a_chosen_group_still_has_samples_to_start() -> None:
    late = GroupProgress("late", 3, done=1, running=("late/1",))  # one sample not started
    whole = GroupProgress("whole", 3, done=2, running=("whole/2",), order=1)
    other = GroupProgress(
        "other", 3, done=0, running=("other/0",), generating=frozenset({"other/0"}), order=2
    )
    assert plan_truncation([late, other], needed=1).hold
    plan = plan_truncation([whole, other], needed=1)
    assert plan.chosen == ("whole",) and plan.cancel == ("other/0",) and not plan.hold
    # samples not started in a group the step will not take do not hold anything
    assert not plan_truncation([whole, late], needed=1).hold
