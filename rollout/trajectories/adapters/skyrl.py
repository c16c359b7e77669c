"""SkyRL: what a custom `GeneratorInterface.generate` returns (`GeneratorOutput`).

The keys of `skyrl_train.generators.base.GeneratorOutput`: `prompt_token_ids`, `response_ids`,
`rewards` (one float per sequence), `loss_masks`, `stop_reasons`, `rollout_metrics`,
`rollout_logprobs`, `trajectory_ids` (`TrajectoryID(instance_id, repetition_id)`; SkyRL's GRPO
groups by `instance_id`), `is_last_step` and `sampling_masks` (None: not step-wise). Plain
lists; pass `make_trajectory_id=skyrl_train.generators.base.TrajectoryID` to get SkyRL's own
type, else a field-compatible `SkyRLTrajectoryId`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rollout.core.types import Trajectory
from rollout.trajectories.adapters.common import response_views

__all__ = ["SkyRLTrajectoryId", "to_skyrl_output"]


@dataclass(frozen=True, slots=True)
class SkyRLTrajectoryId:
    """The fields of SkyRL's `TrajectoryID`: which prompt, and which of its K samples."""

    instance_id: str
    repetition_id: int

    def to_string(self) -> str:
        return f"{self.instance_id}_{self.repetition_id}"


def to_skyrl_output(
    groups: Iterable[Sequence[Trajectory]],
    *,
    make_trajectory_id: Callable[[str, int], Any] = SkyRLTrajectoryId,
) -> dict[str, Any]:
    """The trainable samples of `groups` as a `GeneratorOutput` dict (infra errors left out)."""
    views = response_views(groups)
    rewards = [float(view.reward or 0.0) for view in views]
    return {
        "prompt_token_ids": [list(view.prompt_ids) for view in views],
        "response_ids": [list(view.response_ids) for view in views],
        "rewards": rewards,
        "loss_masks": [list(view.response_mask) for view in views],
        "stop_reasons": [view.stop_reason for view in views],
        "rollout_metrics": {
            "samples": len(views),
            "truncated": sum(view.status == "truncated" for view in views),
            "mean_reward": sum(rewards) / len(rewards) if rewards else 0.0,
        },
        "rollout_logprobs": [list(view.response_logprobs) for view in views],
        "trajectory_ids": [make_trajectory_id(view.group_id, view.sample_index) for view in views],
        "is_last_step": None,
        "sampling_masks": None,
    }
