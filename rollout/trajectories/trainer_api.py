"""What a trainer needs from finished groups: GRPO advantages and right-padded tensors.

Advantages are group-normalised, ``(r − mean) / (std + eps)`` over the group's *trainable*
samples, with the population std (ddof = 0; TRL and verl use the unbiased std, larger by
sqrt(n / (n − 1)); with eps in the denominator both are scale conventions). Samples with an
`infra_error` never enter the statistics and never enter the batch: training on them as
reward 0 (or advantage 0, which still shifts the group mean and std if included) would teach the
policy that an infrastructure failure is its fault.

Alignment: in every tensor, column t refers to token ``input_ids[:, t]``. `old_logprobs[i, t]`
is the behaviour logprob of that token given the tokens before it, so a causal-LM trainer
compares it with ``log_softmax(logits[i, t − 1])[input_ids[i, t]]``. Position 0 is always a
prompt token (loss mask 0), so the shift never drops a trained token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rollout.core.config import TrainerApiConfig
from rollout.core.types import NO_VERSION, Trajectory
from rollout.trajectories.tokenizer import Tokenizer

__all__ = ["TrainBatch", "build_train_batch", "grpo_advantages", "normalized_advantages"]


def normalized_advantages(
    rewards: Sequence[float], *, eps: float, normalize_std: bool = True
) -> list[float]:
    """``(r − mean) / (std + eps)`` per reward (std with ddof = 0); ``r − mean`` without std."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    centered = [reward - mean for reward in rewards]
    if not normalize_std:
        return centered
    std = (sum(value * value for value in centered) / len(centered)) ** 0.5
    return [value / (std + eps) for value in centered]


def grpo_advantages(group: Sequence[Trajectory], config: TrainerApiConfig) -> dict[str, float]:
    """Advantage per trainable sample id of `group`; infra-error samples are left out entirely."""
    trainable = [trajectory for trajectory in group if trajectory.is_trainable]
    advantages = normalized_advantages(
        [float(trajectory.reward or 0.0) for trajectory in trainable],
        eps=config.advantage_eps,
        normalize_std=config.normalize_std,
    )
    return {t.sample_id: a for t, a in zip(trainable, advantages, strict=True)}


@dataclass(frozen=True, slots=True)
class TrainBatch:
    """Right-padded [N, L] tensors, one row per trainable sample (see the module docstring)."""

    input_ids: torch.Tensor  # int64, pad_token_id after the sequence
    attention_mask: torch.Tensor  # int64, 1 on real tokens
    loss_mask: torch.Tensor  # int64, 1 on model-generated tokens
    old_logprobs: torch.Tensor  # float32, behaviour logprob of input_ids[:, t]; 0 elsewhere
    advantages: torch.Tensor  # float32, the sample's advantage on loss-mask positions; 0 elsewhere
    versions: torch.Tensor  # int64, policy version of each generated token; NO_VERSION elsewhere
    sample_ids: tuple[str, ...]
    group_ids: tuple[str, ...]

    @property
    def num_rows(self) -> int:
        return len(self.sample_ids)


def build_train_batch(
    groups: Sequence[Sequence[Trajectory]], config: TrainerApiConfig, tokenizer: Tokenizer
) -> TrainBatch:
    """Advantages per group, then every trainable sample as one right-padded row.

    The pad id is `config.pad_token_id`, or the tokenizer's when that is None.
    """
    pad_id = config.pad_token_id if config.pad_token_id is not None else tokenizer.pad_token_id
    rows: list[tuple[Trajectory, float]] = []
    for group in groups:
        advantages = grpo_advantages(group, config)
        rows.extend((t, advantages[t.sample_id]) for t in group if t.sample_id in advantages)
    width = max((len(t.token_ids) for t, _ in rows), default=0)
    shape = (len(rows), width)
    input_ids = torch.full(shape, pad_id, dtype=torch.int64)
    attention_mask = torch.zeros(shape, dtype=torch.int64)
    loss_mask = torch.zeros(shape, dtype=torch.int64)
    old_logprobs = torch.zeros(shape, dtype=torch.float32)
    advantage = torch.zeros(shape, dtype=torch.float32)
    versions = torch.full(shape, NO_VERSION, dtype=torch.int64)
    for row, (trajectory, value) in enumerate(rows):
        length = len(trajectory.token_ids)
        mask = torch.tensor(trajectory.loss_mask, dtype=torch.int64)
        input_ids[row, :length] = torch.tensor(trajectory.token_ids, dtype=torch.int64)
        attention_mask[row, :length] = 1
        loss_mask[row, :length] = mask
        old_logprobs[row, :length] = torch.tensor(trajectory.logprobs, dtype=torch.float32)
        advantage[row, :length] = mask.to(torch.float32) * value
        versions[row, :length] = torch.tensor(trajectory.versions, dtype=torch.int64)
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        loss_mask=loss_mask,
        old_logprobs=old_logprobs,
        advantages=advantage,
        versions=versions,
        sample_ids=tuple(t.sample_id for t, _ in rows),
        group_ids=tuple(t.group_id for t, _ in rows),
    )
