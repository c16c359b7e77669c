"""Spec of staleness-bounded admission: the (k + async_factor) × B bound and restartability."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

from rollout.core.admission import AdmissionController
from rollout.core.config import AdmissionConfig
from rollout.core.types import Group
from rollout.errors import AdmissionError

B = 4


def controller(
    async_factor: int = 2, num_prompts: int = 50, **overrides: object
) -> AdmissionController:
    config = AdmissionConfig(
        groups_per_step=B, group_size=2, async_factor=async_factor, **overrides
    )  # type: ignore[arg-type]
    return AdmissionController(config, num_prompts=num_prompts)


def test_at_step_zero_async_factor_batches_may_be_admitted() -> None:
    ctl = controller(async_factor=3)
    assert len(ctl.admit()) == 3 * B
    assert ctl.quota() == 0


def test_quota_grows_by_one_batch_per_training_step() -> None:
    ctl = controller(async_factor=2)
    ctl.admit()
    ctl.set_training_step(1)
    assert ctl.quota() == B


def test_on_policy_admits_the_next_batch_only_after_the_weight_update() -> None:
    ctl = controller(async_factor=1)
    batch = ctl.admit()
    ctl.consume(group.group_id for group in batch)
    assert ctl.quota() == 0
    ctl.set_training_step(1)
    assert ctl.quota() == B


def test_admit_respects_max_groups() -> None:
    assert len(controller().admit(max_groups=3)) == 3


@pytest.mark.parametrize("seed", range(20))
def test_admission_bound_holds_at_every_step_of_a_random_run(seed: int) -> None:
    rng = random.Random(seed)
    async_factor = rng.randint(1, 3)
    ctl = controller(async_factor=async_factor, num_prompts=rng.randint(5, 30))
    ready: set[str] = set()
    for _ in range(400):
        live = [group.group_id for group in ctl.live_groups]
        roll = rng.random()
        if roll < 0.4:
            ctl.admit(max_groups=rng.randint(0, 2 * B))
        elif roll < 0.8:
            unfinished = [group_id for group_id in live if group_id not in ready]
            if unfinished:
                ready.add(rng.choice(unfinished))
        elif roll < 0.97:
            if len(ready) >= B:
                batch = rng.sample(sorted(ready), B)
                ctl.consume(batch)
                ready.difference_update(batch)
                ctl.set_training_step(ctl.training_step + 1)
        elif live:
            dropped = rng.choice(live)
            ctl.discard(dropped)
            ready.discard(dropped)
        assert ctl.admitted_total <= (ctl.training_step + async_factor) * B
    assert ctl.training_step > 0  # the run got somewhere


def test_admit_fills_the_bound_exactly_when_prompts_allow() -> None:
    ctl = controller(async_factor=2)
    ctl.admit()
    ctl.set_training_step(3)
    ctl.admit()
    assert ctl.admitted_total == (3 + 2) * B


def run_until_crash(seed: int) -> tuple[list[Group], dict[str, Any]]:
    """Train with random batches, checkpoint at a random step, run on, then crash.

    Returns the groups consumed up to the checkpoint and the checkpoint; the consumption
    after it is lost with the crash (the trainer resumes from the same checkpoint).
    """
    rng = random.Random(seed)
    ctl = controller(async_factor=2, num_prompts=7, shuffle=True, seed=seed)
    committed: list[Group] = []
    checkpoint: dict[str, Any] = {}
    checkpoint_at = rng.randint(1, 6)
    for step in range(10):
        ctl.admit()
        batch = rng.sample(list(ctl.live_groups), B)
        ctl.consume(group.group_id for group in batch)
        ctl.set_training_step(step + 1)
        if step < checkpoint_at:
            committed += batch
        if step + 1 == checkpoint_at:
            checkpoint = json.loads(json.dumps(ctl.state_dict()))  # it must be JSON-ready
    return committed, checkpoint


@pytest.mark.parametrize("seed", range(10))
def test_restart_from_state_dict_loses_and_duplicates_no_prompt(seed: int) -> None:
    rng = random.Random(seed)
    consumed, checkpoint = run_until_crash(seed)
    restored = controller(async_factor=2, num_prompts=7, shuffle=True, seed=seed)
    restored.load_state_dict(checkpoint)
    for step in range(restored.training_step, 12):
        restored.admit()
        batch = rng.sample(list(restored.live_groups), B)
        restored.consume(group.group_id for group in batch)
        restored.set_training_step(step + 1)
        consumed += batch
    consumed_ids = [group.group_id for group in consumed]
    assert len(consumed_ids) == len(set(consumed_ids))  # nothing consumed twice
    admitted_prompts = [g.prompt_index for g in (*consumed, *restored.live_groups)]
    fresh = controller(async_factor=2, num_prompts=7, shuffle=True, seed=seed)
    assert Counter(admitted_prompts) == Counter(fresh.peek_prompt_indices(restored.cursor))


def test_restored_unconsumed_groups_come_back_first_without_using_quota() -> None:
    ctl = controller(async_factor=2)
    live = ctl.admit()
    ctl.consume(group.group_id for group in live[:B])
    ctl.set_training_step(1)
    restored = controller(async_factor=2)
    restored.load_state_dict(ctl.state_dict())
    quota_before = restored.quota()
    again = restored.admit()
    assert [g.group_id for g in again[:B]] == [g.group_id for g in live[B:]]
    assert len(again) == B + quota_before


def test_readmitted_group_keeps_its_prompt_and_gets_a_new_attempt() -> None:
    ctl = controller()
    original = ctl.admit()[0]
    restored = controller()
    restored.load_state_dict(ctl.state_dict())
    again = restored.admit()[0]
    assert (again.group_id, again.prompt_index, again.attempt) == (
        original.group_id,
        original.prompt_index,
        original.attempt + 1,
    )


def test_requeued_group_restarts_from_scratch_on_the_next_admit() -> None:
    ctl = controller()
    first = ctl.admit()[0]
    ctl.requeue(first.group_id)
    assert ctl.admit()[0].attempt == first.attempt + 1


def test_peek_names_the_prompts_admit_will_take_without_taking_them() -> None:
    ctl = controller(shuffle=True, seed=3)
    peeked = ctl.peek_prompt_indices(5)
    assert ctl.cursor == 0
    assert tuple(group.prompt_index for group in ctl.admit(max_groups=5)) == peeked


def test_discarded_group_returns_its_quota() -> None:
    ctl = controller()
    group = ctl.admit()[0]
    ctl.discard(group.group_id)
    assert ctl.quota() == 1


def test_consuming_a_group_twice_raises() -> None:
    ctl = controller()
    group = ctl.admit()[0]
    ctl.consume([group.group_id])
    with pytest.raises(AdmissionError):
        ctl.consume([group.group_id])


def test_training_step_cannot_go_backwards() -> None:
    ctl = controller()
    ctl.set_training_step(3)
    with pytest.raises(AdmissionError):
        ctl.set_training_step(2)


def test_each_epoch_visits_every_prompt_once_in_a_seeded_order() -> None:
    ctl = controller(num_prompts=6, shuffle=True, seed=1)
    order = ctl.peek_prompt_indices(12)
    assert sorted(order[:6]) == sorted(order[6:]) == list(range(6))
    assert order[:6] != order[6:]
    assert controller(num_prompts=6, shuffle=True, seed=1).peek_prompt_indices(12) == order


def test_max_epochs_stops_admission_when_the_prompts_run_out() -> None:
    ctl = controller(async_factor=3, num_prompts=5, max_epochs=1)
    assert len(ctl.admit()) == 5
    assert ctl.quota() == 0


def test_staleness_deadline_is_async_factor_minus_one_steps_after_admission() -> None:
    ctl = controller(async_factor=3)
    ctl.set_training_step(2)
    assert ctl.staleness_deadline(ctl.admit()[0]) == 4


def test_checkpoint_of_another_dataset_is_rejected() -> None:
    state = controller(num_prompts=10).state_dict()
    with pytest.raises(AdmissionError, match="same dataset"):
        controller(num_prompts=11).load_state_dict(state)


def test_controller_over_a_prompt_source_draws_indices_into_it() -> None:
    prompts = ["fix a", "fix b", "fix c"]
    config = AdmissionConfig(groups_per_step=3, async_factor=1, shuffle=False)
    ctl = AdmissionController.for_source(config, prompts)
    assert [prompts[g.prompt_index] for g in ctl.admit()] == prompts


def test_async_factor_zero_means_on_policy_as_one_does() -> None:
    on_policy = AdmissionConfig(groups_per_step=2, async_factor=0)
    assert on_policy.async_factor == 1
    assert AdmissionController(on_policy, num_prompts=10).admission_limit() == 2
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        AdmissionConfig(groups_per_step=2, async_factor=-1)


def test_without_a_consume_window_any_group_may_be_consumed() -> None:
    ctl = controller()
    ctl.admit()
    assert ctl.consumable() is None


@pytest.mark.parametrize(("window", "size"), [(1.0, 4), (1.5, 6), (1.3, 6), (2.0, 8)])
def test_the_consume_window_is_the_oldest_ceil_w_times_b_live_groups(
    window: float, size: int
) -> None:
    ctl = controller(consume_window=window)
    admitted = [group.group_id for group in ctl.admit()]
    assert ctl.consumable() == frozenset(admitted[:size])
    ctl.consume(admitted[1:2])  # a younger group consumed: the window slides past it
    assert ctl.consumable() == frozenset([admitted[0], *admitted[2 : size + 1]])


def test_a_consume_window_below_one_batch_is_an_error() -> None:
    with pytest.raises(ValueError, match="consume_window"):
        controller(consume_window=0.5)
