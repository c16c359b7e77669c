"""`Batch`: what the trainer gets from `Conductor.batches()` — B complete groups, and helpers.

Each group holds its K trajectories (samples that exhausted their retries carry `infra_error`
and are left out of advantages and tensors). `advantages` and `train_batch` wrap
`rollout.trajectories.trainer_api` (GRPO); torch is imported only when they are called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rollout.core.config import TrainerApiConfig
from rollout.core.deadline import StepDeadline
from rollout.core.types import NO_VERSION, Trajectory
from rollout.trajectories.tokenizer import Tokenizer

if TYPE_CHECKING:
    from rollout.trajectories.trainer_api import TrainBatch

__all__ = ["Batch", "BatchOutline", "group_staleness"]


def group_staleness(group: Sequence[Trajectory], policy_version: int) -> int:
    """Steps the group's oldest generated token is behind `policy_version` (0 = on-policy)."""
    versions: set[int] = set()
    for trajectory in group:
        versions.update(trajectory.versions)  # a set in C: the versions are few, tokens many
    versions.discard(NO_VERSION)
    return policy_version - min(versions) if versions else 0


@dataclass(frozen=True, slots=True)
class BatchOutline:
    """What a step's summary line needs of its batch, without the token arrays: a long run
    keeps one of these per step instead of whole batches (issue 28: keeping every batch grew
    a run's memory by about 1.5 MB a step)."""

    step: int
    wait_s: float
    staleness: tuple[int, ...]
    rewards_mean: float | None
    rewards: tuple[tuple[tuple[float | None, str | None], ...], ...]  # (reward, infra_error)


@dataclass(frozen=True, slots=True)
class Batch:
    """One training step's groups, in the order they completed.

    `step` counts from 1. Times are on the conductor's clock: `requested_s` is when the
    trainer asked for the batch, `complete_s` when its last group was finished and rewarded,
    `ready_s` when it was handed over (the later of the two). `policy_version` is the version
    the trainer is about to update. `deadline` says how a step with a wall-clock budget went
    (None without one); a `short` step holds fewer than B groups.
    """

    step: int
    groups: tuple[tuple[Trajectory, ...], ...]
    policy_version: int
    requested_s: float
    complete_s: float
    ready_s: float
    deadline: StepDeadline | None = None

    @property
    def wait_s(self) -> float:
        """How long the trainer waited for this batch (0 when it was complete in time)."""
        return self.ready_s - self.requested_s

    @property
    def group_ids(self) -> tuple[str, ...]:
        return tuple(group[0].group_id for group in self.groups)

    @property
    def trajectories(self) -> tuple[Trajectory, ...]:
        return tuple(trajectory for group in self.groups for trajectory in group)

    def staleness(self) -> list[int]:
        """Per group: steps its oldest token is behind the policy being trained."""
        return [group_staleness(group, self.policy_version) for group in self.groups]

    def rewards_mean(self) -> float | None:
        """Mean reward over trainable samples (None if there are none)."""
        rewards = [t.reward for t in self.trajectories if t.is_trainable and t.reward is not None]
        return sum(rewards) / len(rewards) if rewards else None

    def outline(self) -> BatchOutline:
        """This batch's summary, without its trajectories."""
        return BatchOutline(
            step=self.step,
            wait_s=self.wait_s,
            staleness=tuple(self.staleness()),
            rewards_mean=self.rewards_mean(),
            rewards=tuple(tuple((t.reward, t.infra_error) for t in group) for group in self.groups),
        )

    def advantages(self, config: TrainerApiConfig) -> dict[str, float]:
        """GRPO advantage per trainable sample id."""
        from rollout.trajectories.trainer_api import grpo_advantages  # deferred: imports torch

        advantages: dict[str, float] = {}
        for group in self.groups:
            advantages.update(grpo_advantages(group, config))
        return advantages

    def train_batch(self, config: TrainerApiConfig, tokenizer: Tokenizer) -> TrainBatch:
        """Right-padded tensors of every trainable sample (`trainer_api.TrainBatch`)."""
        from rollout.trajectories.trainer_api import build_train_batch  # deferred: imports torch

        return build_train_batch(self.groups, config, tokenizer)
