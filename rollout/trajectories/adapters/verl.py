"""verl: the padded batch its agent loop hands the trainer (`DataProto`).

Field for field what `verl.experimental.agent_loop` produces (verl 0.9): `prompts` left-padded
to the longest prompt (or `prompt_length`), `responses` right-padded; `input_ids` their
concatenation; `attention_mask` 1 on real tokens; `position_ids` counting real tokens from 0
(0 on left padding); `response_mask` 1 on model tokens only; `rollout_log_probs` the behaviour
logprob of each response token; `rm_scores` the reward on the last real response token. Extra:
`rollout_versions`, the policy version of each response token (-1 off the mask). Per sample in
`non_tensors`: `uid` (the group id, which verl's GRPO groups by), `sample_id`, `status`,
`stop_reason`, `num_turns`. torch and numpy only; `VerlBatch.to_dataproto()` imports verl.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rollout.core.types import NO_VERSION, Trajectory
from rollout.trajectories.adapters.common import ResponseView, response_views

__all__ = ["VerlBatch", "to_verl_batch"]


@dataclass(frozen=True)
class VerlBatch:
    """`tensors` [N, ...] (verl's `batch`), `non_tensors` numpy object arrays of length N."""

    tensors: dict[str, torch.Tensor]
    non_tensors: dict[str, np.ndarray]
    meta_info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.tensors["input_ids"].shape[0])

    def to_dataproto(self) -> Any:
        """verl's own `DataProto` (needs `pip install verl`)."""
        from verl import DataProto  # deferred: verl is an optional, heavy dependency

        return DataProto.from_dict(
            tensors=self.tensors, non_tensors=self.non_tensors, meta_info=self.meta_info
        )


def to_verl_batch(
    groups: Iterable[Sequence[Trajectory]],
    *,
    pad_token_id: int,
    prompt_length: int | None = None,
    response_length: int | None = None,
) -> VerlBatch:
    """Pad the trainable samples of `groups` into verl's batch layout.

    `prompt_length` / `response_length` fix the widths (verl's `rollout.prompt_length` and
    `rollout.response_length`); None: the longest in the batch.

    Raises:
        ValueError: no sample to train on, or one is longer than a fixed width (cutting it
            would train on tokens other than those sampled).
    """
    views = response_views(groups)
    if not views:
        raise ValueError("no trainable sample in these groups (all had infrastructure errors)")
    width_p = _width(views, "prompt", prompt_length, lambda v: len(v.prompt_ids))
    width_r = _width(views, "response", response_length, lambda v: len(v.response_ids))
    rows = len(views)
    prompts = torch.full((rows, width_p), pad_token_id, dtype=torch.int64)
    prompt_attention = torch.zeros((rows, width_p), dtype=torch.int64)
    responses = torch.full((rows, width_r), pad_token_id, dtype=torch.int64)
    response_attention = torch.zeros((rows, width_r), dtype=torch.int64)
    response_mask = torch.zeros((rows, width_r), dtype=torch.int64)
    logprobs = torch.zeros((rows, width_r), dtype=torch.float32)
    versions = torch.full((rows, width_r), NO_VERSION, dtype=torch.int64)
    rm_scores = torch.zeros((rows, width_r), dtype=torch.float32)
    for row, view in enumerate(views):
        p, r = len(view.prompt_ids), len(view.response_ids)
        prompts[row, width_p - p :] = torch.tensor(view.prompt_ids, dtype=torch.int64)
        prompt_attention[row, width_p - p :] = 1
        if r:
            responses[row, :r] = torch.tensor(view.response_ids, dtype=torch.int64)
            response_attention[row, :r] = 1
            response_mask[row, :r] = torch.tensor(view.response_mask, dtype=torch.int64)
            logprobs[row, :r] = torch.tensor(view.response_logprobs, dtype=torch.float32)
            versions[row, :r] = torch.tensor(view.response_versions, dtype=torch.int64)
            rm_scores[row, r - 1] = float(view.reward or 0.0)
    attention_mask = torch.cat([prompt_attention, response_attention], dim=1)
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0)
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "response_mask": response_mask,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "rollout_log_probs": logprobs,
        "rollout_versions": versions,
        "rm_scores": rm_scores,
    }
    non_tensors = {
        "uid": _objects(view.group_id for view in views),
        "sample_id": _objects(view.sample_id for view in views),
        "status": _objects(view.status for view in views),
        "stop_reason": _objects(view.stop_reason for view in views),
        "num_turns": np.array([view.num_turns for view in views], dtype=np.int64),
    }
    return VerlBatch(tensors, non_tensors, {"pad_token_id": pad_token_id})


def _width(views: list[ResponseView], part: str, fixed: int | None, length: Any) -> int:
    longest = max(length(view) for view in views)
    if fixed is None:
        return max(1, longest)
    if longest > fixed:
        raise ValueError(
            f"a {part} has {longest} tokens, more than {part}_length={fixed}; raise it (verl's "
            f"rollout.{part}_length) rather than cut the sampled tokens"
        )
    return fixed


def _objects(values: Iterable[Any]) -> np.ndarray:
    items = list(values)
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array
