"""slime: `Sample` records, as `slime.utils.types.Sample.from_dict` reads them.

`tokens` is the whole sequence (prompt + response); `response_length`, `loss_mask` and
`rollout_log_probs` cover the response only; `weight_versions` has one entry per generation
call (per model turn: the versions its tokens were sampled under, in order); `status` one of
slime's `Sample.Status` values (`completed`, `truncated`, `failed`); `non_generation_time` the
seconds spent outside generation; `session_id` for slime's consistent-hashing router. With
`keep_failed`, infrastructure failures come as `failed` with `remove_sample` set. Pass a
`decode` (token ids -> text) to fill `prompt` and `response`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rollout.core.types import NO_VERSION, Trajectory
from rollout.trajectories.adapters.common import response_view

__all__ = ["to_slime_samples"]


def to_slime_samples(
    groups: Iterable[Sequence[Trajectory]],
    *,
    keep_failed: bool = False,
    decode: Callable[[Sequence[int]], str] | None = None,
) -> list[dict[str, Any]]:
    """One `Sample` dict per sample of `groups` (`group_index` numbers the groups)."""
    samples: list[dict[str, Any]] = []
    for group_index, group in enumerate(groups):
        for trajectory in group:
            if trajectory.infra_error is not None and not keep_failed:
                continue
            view = response_view(trajectory)
            samples.append(
                {
                    "group_index": group_index,
                    "index": len(samples),
                    "prompt": decode(view.prompt_ids) if decode else "",
                    "tokens": list(view.trajectory_tokens),
                    "response": decode(view.response_ids) if decode else "",
                    "response_length": len(view.response_ids),
                    "reward": view.reward,
                    "loss_mask": list(view.response_mask),
                    "weight_versions": _turn_versions(trajectory),
                    "rollout_log_probs": list(view.response_logprobs),
                    "remove_sample": view.status == "failed",
                    "status": view.status,
                    "metadata": {
                        "sample_id": view.sample_id,
                        "group_id": view.group_id,
                        "stop_reason": view.stop_reason,
                        "num_turns": view.num_turns,
                    },
                    "session_id": view.session_id,
                    "non_generation_time": view.non_generation_s,
                }
            )
    return samples


def _turn_versions(trajectory: Trajectory) -> list[str]:
    """The policy versions of each model turn's tokens, in order, as strings (slime's type)."""
    versions: list[str] = []
    for turn in trajectory.turns:
        for version in trajectory.versions[turn.gen_start : turn.gen_end]:
            if version != NO_VERSION and (not versions or versions[-1] != str(version)):
                versions.append(str(version))
    return versions
