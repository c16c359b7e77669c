"""GroupSlotBudget: sample slots a new group takes all at once and gives back one by one
(AReaL's sample-level refill)."""

from __future__ import annotations

import pytest

from rollout.core.group_slots import GroupSlotBudget


def test_a_new_group_needs_all_its_slots_free_and_takes_them_at_once() -> None:
    budget = GroupSlotBudget(8)
    assert budget.fits("g0", 8)
    budget.take("g0", 8)
    assert budget.free == 0 and not budget.fits("g1", 8)


def test_siblings_of_a_started_group_claim_its_reserved_slots() -> None:
    budget = GroupSlotBudget(8)
    budget.take("g0", 4)
    assert budget.need("g0", 4) == 0 and budget.free == 4
    for _ in range(3):
        budget.take("g0", 4)
    assert budget.free == 4 and budget.need("g0", 4) == 1  # every member went live


def test_finished_samples_of_unfinished_groups_admit_a_new_group() -> None:
    budget = GroupSlotBudget(8)
    for group in ("g0", "g1"):
        for _ in range(4):
            budget.take(group, 4)
    for _ in range(3):
        budget.give_back()
    assert not budget.fits("g2", 4)
    budget.give_back()  # the fourth finished sample, from either group
    assert budget.fits("g2", 4)


def test_a_group_larger_than_every_slot_takes_them_all() -> None:
    budget = GroupSlotBudget(4)
    assert budget.need("big", 8) == 4
    budget.take("big", 8)
    assert budget.free == 0


def test_a_member_of_a_started_group_run_again_needs_one_slot() -> None:
    budget = GroupSlotBudget(4)
    for _ in range(4):
        budget.take("g0", 4)
    budget.give_back()
    assert budget.need("g0", 4) == 1 and budget.fits("g0", 4)


def test_giving_back_more_than_was_taken_is_an_error() -> None:
    with pytest.raises(ValueError, match="left twice"):
        GroupSlotBudget(2).give_back()
