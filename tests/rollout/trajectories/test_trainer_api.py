"""Spec of the trainer interface: GRPO advantages and aligned, right-padded tensors."""

from __future__ import annotations

import pytest
import torch

from rollout.core.config import TrainerApiConfig
from rollout.core.types import NO_VERSION, Trajectory
from rollout.trajectories.trainer_api import (
    TrainBatch,
    build_train_batch,
    grpo_advantages,
    normalized_advantages,
)
from tests.rollout.trajectory_factory import TOKENIZER, make_group, make_trajectory

CONFIG = TrainerApiConfig(advantage_eps=1e-6)


def test_advantages_are_group_normalised() -> None:
    advantages = normalized_advantages([1.0, 0.0, 1.0, 0.0], eps=0.0)
    assert advantages == pytest.approx([1.0, -1.0, 1.0, -1.0])


def test_equal_rewards_give_zero_advantage() -> None:
    assert normalized_advantages([0.5, 0.5, 0.5], eps=1e-6) == pytest.approx([0.0, 0.0, 0.0])


def test_without_std_normalisation_advantages_are_centred_rewards() -> None:
    assert normalized_advantages([3.0, 1.0], eps=1e-6, normalize_std=False) == [1.0, -1.0]


def test_infra_error_samples_are_excluded_from_the_statistics() -> None:
    group = make_group("g", [1.0, 0.0, 0.0])
    group[2] = make_trajectory("g", 2, reward=0.0, infra_error="container died")
    advantages = grpo_advantages(group, CONFIG)
    assert set(advantages) == {group[0].sample_id, group[1].sample_id}
    assert advantages[group[0].sample_id] == pytest.approx(1.0, abs=1e-5)


def test_infra_error_samples_are_left_out_of_the_batch() -> None:
    group = make_group("g", [1.0, 0.0])
    group[1] = make_trajectory("g", 1, reward=None, infra_error="engine died")
    batch = build_train_batch([group], CONFIG, TOKENIZER)
    assert batch.sample_ids == (group[0].sample_id,)


def batch_of_two() -> tuple[list[list[Trajectory]], TrainBatch]:
    """Two groups of two: one-turn samples and three-turn samples, so rows need padding."""
    groups = [make_group("g1", [1.0, 0.0], turns=1), make_group("g2", [0.0, 1.0], turns=3)]
    return groups, build_train_batch(groups, CONFIG, TOKENIZER)


def test_rows_are_right_padded_with_the_pad_id() -> None:
    groups, batch = batch_of_two()
    short = groups[0][0]
    row = batch.input_ids[0]
    assert row[: len(short.token_ids)].tolist() == list(short.token_ids)
    assert set(row[len(short.token_ids) :].tolist()) == {TOKENIZER.pad_token_id}
    assert batch.attention_mask[0].sum().item() == len(short.token_ids)


def test_configured_pad_id_overrides_the_tokenizers() -> None:
    groups = [make_group("g1", [1.0, 0.0], turns=1), make_group("g2", [0.0, 1.0], turns=3)]
    batch = build_train_batch(groups, TrainerApiConfig(pad_token_id=0), TOKENIZER)
    assert batch.input_ids[0, -1].item() == 0


def test_loss_mask_and_logprobs_align_with_the_generated_tokens() -> None:
    groups, batch = batch_of_two()
    for row, trajectory in enumerate(t for g in groups for t in g):
        for turn in trajectory.turns:
            span = slice(turn.gen_start, turn.gen_end)
            generated = turn.gen_end - turn.gen_start
            assert batch.loss_mask[row, span].tolist() == [1] * generated
            assert batch.old_logprobs[row, span].tolist() == pytest.approx(
                trajectory.logprobs[span]
            )
        assert batch.loss_mask[row].sum().item() == trajectory.num_generated_tokens


def test_logprobs_are_zero_wherever_the_loss_mask_is_zero() -> None:
    _, batch = batch_of_two()
    assert torch.all(batch.old_logprobs[batch.loss_mask == 0] == 0)


def test_advantage_is_broadcast_over_response_tokens_only() -> None:
    groups, batch = batch_of_two()
    advantages = grpo_advantages(groups[0], CONFIG)
    expected = advantages[groups[0][0].sample_id]
    row_mask = batch.loss_mask[0].bool()
    assert torch.allclose(batch.advantages[0][row_mask], torch.tensor(expected))
    assert torch.all(batch.advantages[0][~row_mask] == 0)


def test_versions_mark_generated_tokens_and_nothing_else() -> None:
    _, batch = batch_of_two()
    generated = batch.loss_mask == 1
    assert torch.all(batch.versions[generated] >= 0)
    assert torch.all(batch.versions[~generated] == NO_VERSION)


def test_first_position_is_never_trained_so_the_causal_shift_drops_nothing() -> None:
    _, batch = batch_of_two()
    assert torch.all(batch.loss_mask[:, 0] == 0)
