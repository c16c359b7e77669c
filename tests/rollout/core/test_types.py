"""Spec of the rollout data model: the sample state machine and trajectory invariants."""

from __future__ import annotations

import pytest

from rollout.core.types import (
    LEGAL_TRANSITIONS,
    NO_VERSION,
    Group,
    Sample,
    SampleState,
    Trajectory,
    Turn,
    check_transition,
)
from rollout.errors import IllegalTransitionError, TrajectoryError

S = SampleState

HAPPY_PATH = [S.WAIT_GEN, S.GEN, S.WAIT_ACT, S.ACT, S.WAIT_GEN, S.GEN, S.DONE, S.REWARDED]


def all_edges() -> list[tuple[SampleState, SampleState]]:
    return [(a, b) for a in SampleState for b in SampleState]


def test_the_documented_life_of_a_sample_is_legal() -> None:
    sample = Sample("s", "g")
    for state in HAPPY_PATH:
        sample.advance(state)
    assert sample.state is S.REWARDED


@pytest.mark.parametrize(("current", "target"), all_edges())
def test_only_edges_in_the_table_are_accepted(current: SampleState, target: SampleState) -> None:
    if target in LEGAL_TRANSITIONS[current]:
        check_transition(current, target)
    else:
        with pytest.raises(IllegalTransitionError):
            check_transition(current, target)


def test_illegal_transition_raises_at_once_and_leaves_the_state_unchanged() -> None:
    sample = Sample("s", "g")
    sample.advance(S.WAIT_GEN)
    with pytest.raises(IllegalTransitionError, match="wait_gen cannot go to act"):
        sample.advance(S.ACT)
    assert sample.state is S.WAIT_GEN


@pytest.mark.parametrize("aborted", [S.PREEMPTED, S.INTERRUPTED])
def test_aborted_sample_resumes_straight_into_generation(aborted: SampleState) -> None:
    sample = Sample("s", "g")
    for state in (S.WAIT_GEN, S.GEN, aborted, S.GEN):
        sample.advance(state)
    assert sample.state is S.GEN


def test_preemptions_and_interruptions_are_counted_by_their_transitions() -> None:
    sample = Sample("s", "g")
    for state in (S.WAIT_GEN, S.GEN, S.PREEMPTED, S.GEN, S.INTERRUPTED, S.GEN, S.PREEMPTED):
        sample.advance(state)
    assert (sample.preemptions, sample.interruptions) == (2, 1)


@pytest.mark.parametrize("state", [s for s in SampleState if s not in (S.DONE, S.REWARDED)])
def test_every_live_state_may_end_the_episode(state: SampleState) -> None:
    assert S.DONE in LEGAL_TRANSITIONS[state]


def test_rewarded_is_terminal() -> None:
    assert LEGAL_TRANSITIONS[S.REWARDED] == frozenset()


def test_group_sample_ids_are_distinct_across_restart_attempts() -> None:
    first = Group("g1", prompt_index=3, size=2, admitted_step=0)
    retry = Group("g1", prompt_index=3, size=2, admitted_step=4, attempt=1)
    assert len(set(first.sample_ids()) | set(retry.sample_ids())) == 4


def make_trajectory(**overrides: object) -> Trajectory:
    """Prompt of 3 tokens, a turn of 2 generated tokens, a 2-token observation, a last turn of 1."""
    fields: dict[str, object] = {
        "sample_id": "g-a0-s0",
        "group_id": "g",
        "prompt_index": 0,
        "sample_index": 0,
        "token_ids": (1, 2, 3, 10, 11, 4, 5, 12),
        "loss_mask": (0, 0, 0, 1, 1, 0, 0, 1),
        "logprobs": (0.0, 0.0, 0.0, -0.5, -0.25, 0.0, 0.0, -1.0),
        "versions": (NO_VERSION,) * 3 + (0, 0) + (NO_VERSION,) * 2 + (1,),
        "prompt_tokens": 3,
        "turns": (
            Turn(index=0, gen_start=3, gen_end=5, obs_start=5, obs_end=7, tool_name="bash"),
            Turn(index=1, gen_start=7, gen_end=8),
        ),
        "reward": 1.0,
    }
    fields.update(overrides)
    return Trajectory(**fields)  # type: ignore[arg-type]


def test_valid_trajectory_counts_generated_tokens() -> None:
    assert make_trajectory().num_generated_tokens == 3


@pytest.mark.parametrize(
    "overrides",
    [
        {"logprobs": (0.0,) * 7},  # not aligned with token_ids
        {"versions": (NO_VERSION,) * 8},  # generated tokens without a version
        {"logprobs": (-0.1, 0.0, 0.0, -0.5, -0.25, 0.0, 0.0, -1.0)},  # prompt token with a logprob
        {"loss_mask": (0, 0, 0, 1, 1, 0, 0, 2)},  # mask is not 0/1
        {"prompt_tokens": 9},
        {"turns": (Turn(index=0, gen_start=3, gen_end=6),)},  # span covers a template token
    ],
)
def test_trajectory_with_broken_alignment_is_rejected(overrides: dict[str, object]) -> None:
    with pytest.raises(TrajectoryError):
        make_trajectory(**overrides)


def test_trajectory_survives_a_dict_round_trip() -> None:
    trajectory = make_trajectory(infra_error=None, info={"tests_passed": 3})
    assert Trajectory.from_dict(trajectory.to_dict()) == trajectory


def test_infra_error_sample_is_not_trainable_even_with_a_reward() -> None:
    assert not make_trajectory(reward=0.0, infra_error="container died").is_trainable


def test_phase_totals_sum_turn_timings() -> None:
    turns = (
        Turn(index=0, gen_start=3, gen_end=5, obs_start=5, obs_end=7, gen_s=2.0, act_s=1.5),
        Turn(index=1, gen_start=7, gen_end=8, pre_gen_s=0.5, gen_s=1.0),
    )
    totals = make_trajectory(turns=turns, env_init_s=4.0).phase_totals_s()
    assert totals == {"env_init": 4.0, "pre_gen": 0.5, "gen": 3.0, "pre_act": 0.0, "act": 1.5}
