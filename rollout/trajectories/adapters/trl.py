"""TRL: what `GRPOTrainer(rollout_func=...)` expects back (TRL 1.x, experimental API).

Required keys: `prompt_ids`, `completion_ids`, `logprobs` (one list per completion, aligned
with `completion_ids`). `env_mask` (1 on model tokens, 0 on tool and template tokens) is what
TRL reads as its tool mask; every other key reaches the reward functions as a keyword argument:
`env_reward` carries our reward (use `lambda env_reward, **_: env_reward` as the reward
function), `group_id`, `sample_id` and `stop_reason` ride along. TRL passes each prompt
`num_generations` times in a row and groups the completions the same way, so only groups whose
every sample succeeded are kept (a failed sample drops its group; it is not replaced by a
reward-0 stand-in). Tested through TRL's own `GRPOTrainer` (tests/.../test_adapters_trl.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rollout.core.types import Trajectory
from rollout.trajectories.adapters.common import complete_groups, response_view

__all__ = ["to_trl_rollout"]


def to_trl_rollout(
    groups: Iterable[Sequence[Trajectory]], *, num_generations: int
) -> dict[str, list[Any]]:
    """The complete groups of `groups` as a `rollout_func` result.

    Raises:
        ValueError: a group does not hold `num_generations` samples.
    """
    kept = complete_groups(groups)
    for group in kept:
        if len(group) != num_generations:
            raise ValueError(
                f"group {group[0].group_id} has {len(group)} samples; TRL's num_generations is "
                f"{num_generations} (set group_size to it)"
            )
    views = [response_view(trajectory) for group in kept for trajectory in group]
    return {
        "prompt_ids": [list(view.prompt_ids) for view in views],
        "completion_ids": [list(view.response_ids) for view in views],
        "logprobs": [list(view.response_logprobs) for view in views],
        "env_mask": [list(view.response_mask) for view in views],
        "env_reward": [float(view.reward or 0.0) for view in views],
        "group_id": [view.group_id for view in views],
        "sample_id": [view.sample_id for view in views],
        "stop_reason": [view.stop_reason for view in views],
    }
