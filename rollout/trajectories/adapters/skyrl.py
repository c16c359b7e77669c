"""SkyRL: what a custom `GeneratorInterface.generate` returns (`GeneratorOutput`).

The keys of `skyrl.train.generators.base.GeneratorOutput` (SkyRL 0.4; `skyrl_train.generators`
in the older skyrl-train 0.3 package): `prompt_token_ids`, `response_ids`, `rewards` (one
float per sequence), `loss_masks`, `stop_reasons`, `rollout_metrics`, `rollout_logprobs`,
`trajectory_ids` (`TrajectoryID(instance_id, repetition_id)`; SkyRL's GRPO groups by
`instance_id`), `trajectory_generation_times` and `trajectory_time_splits` (`llm` / `env`
seconds per trajectory), and None for what the conductor does not produce
(`rollout_expert_indices`, `rollout_sample_support`, `is_last_step`: not step-wise,
`env_metrics`, `pixel_values`, `image_grid_thw`).

SkyRL's `validate_generator_output` wants one row per prompt it sent, so a sample lost to an
infrastructure error is not dropped: it is a zero-mask row (`every_row_views`: loss mask all 0,
stop reason `infra_error`, reward the mean of its group's live samples). Plain lists; pass
`make_trajectory_id=skyrl.train.generators.base.TrajectoryID` to get SkyRL's own type, else a
field-compatible `SkyRLTrajectoryId`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rollout.core.types import Trajectory
from rollout.trajectories.adapters.common import every_row_views

__all__ = ["SKYRL_GENERATOR_OUTPUT_KEYS", "SkyRLTrajectoryId", "to_skyrl_output"]

SKYRL_GENERATOR_OUTPUT_KEYS: tuple[str, ...] = (
    "prompt_token_ids",
    "response_ids",
    "rewards",
    "loss_masks",
    "stop_reasons",
    "rollout_metrics",
    "rollout_logprobs",
    "trajectory_ids",
    "trajectory_generation_times",
    "trajectory_time_splits",
    "rollout_expert_indices",
    "rollout_sample_support",
    "is_last_step",
    "env_metrics",
    "pixel_values",
    "image_grid_thw",
)
"""The fields of SkyRL 0.4's `GeneratorOutput`, in its order (checked against the package)."""


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
    pad_token_id: int | None = None,
) -> dict[str, Any]:
    """Every sample of `groups` as a `GeneratorOutput` dict, one row each (see the module
    docstring for failed samples; `pad_token_id` fills a failed row that has no response
    token, so none is empty)."""
    views = every_row_views(groups, filler_id=pad_token_id)
    rewards = [float(view.reward or 0.0) for view in views]
    live = [view for view in views if view.status != "failed"]
    return {
        "prompt_token_ids": [list(view.prompt_ids) for view in views],
        "response_ids": [list(view.response_ids) for view in views],
        "rewards": rewards,
        "loss_masks": [list(view.response_mask) for view in views],
        "stop_reasons": [view.stop_reason for view in views],
        "rollout_metrics": {
            "samples": len(views),
            "failed": len(views) - len(live),
            "truncated": sum(view.status == "truncated" for view in views),
            "mean_reward": (sum(v.reward or 0.0 for v in live) / len(live)) if live else 0.0,
        },
        "rollout_logprobs": [list(view.response_logprobs) for view in views],
        "trajectory_ids": [make_trajectory_id(view.group_id, view.sample_index) for view in views],
        "trajectory_generation_times": [
            view.generation_s + view.non_generation_s for view in views
        ],
        "trajectory_time_splits": {
            "llm": [view.generation_s for view in views],
            "env": [view.non_generation_s for view in views],
        },
        "rollout_expert_indices": None,
        "rollout_sample_support": None,
        "is_last_step": None,
        "env_metrics": None,
        "pixel_values": None,
        "image_grid_thw": None,
    }
