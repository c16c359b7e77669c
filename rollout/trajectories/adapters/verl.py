"""verl: the padded batch its agent loop hands the trainer (`DataProto`).

Field for field what `verl.experimental.agent_loop` produces (verl 0.9): `prompts` left-padded
to the longest prompt (or `prompt_length`), `responses` right-padded; `input_ids` their
concatenation; `attention_mask` 1 on real tokens; `position_ids` counting real tokens from 0
(0 on left padding); `response_mask` 1 on model tokens only; `rollout_log_probs` the behaviour
logprob of each response token; `rm_scores` the reward on the last real response token. Extra:
`rollout_versions`, the policy version of each response token (-1 off the mask). Per sample in
`non_tensors`: `uid` (the group id, which verl's GRPO groups by), `sample_id`, `status`,
`stop_reason`, `__num_turns__` (verl's name, int32) and `multi_modal_inputs` (an empty dict
per row, as verl's agent loop gives text rows). torch and numpy only; `VerlBatch`'s
`to_dataproto()` and `as_gen_output()` import verl.

In `RayPPOTrainer.fit` the rollout's output goes through verl's own steps unchanged:
`as_gen_output(gen_batch)` returns one row per row verl sent (build the batch with
`keep_failed=True`: a sample lost to an infrastructure error is a zero-mask row), carries
verl's own non-tensor fields (its `uid`s, so `batch.union(gen_batch_output)` finds them equal)
and `meta_info["timing"]`, which `fit` reads and pops.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rollout.core.types import NO_VERSION, Trajectory
from rollout.trajectories.adapters.common import ResponseView, every_row_views, response_views

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

    def as_gen_output(self, gen_batch: Any) -> Any:
        """The `DataProto` to return from `generate_sequences(gen_batch)` inside verl's `fit`.

        `gen_batch` is what verl sent: the prompts repeated `rollout.n` times, interleaved, so
        rows i*n .. i*n+n-1 share prompt i's `uid`. The groups this batch was built from must
        come in that order, one group per prompt. verl's non-tensor fields are copied (verl's
        own agent loop does the same), our group id moves to `group_id`.

        Raises:
            ValueError: the row counts differ, or rows sharing a verl `uid` are not one group.
        """
        from verl import DataProto  # deferred: verl is an optional, heavy dependency

        if len(gen_batch) != len(self):
            raise ValueError(
                f"verl sent {len(gen_batch)} rows and the batch has {len(self)}: return one row "
                "per sample verl asked for (build it with keep_failed=True, and one group of "
                "rollout.n samples per prompt)"
            )
        theirs = gen_batch.non_tensor_batch
        ours = self.non_tensors["uid"]
        if "uid" in theirs:
            _check_same_grouping(list(theirs["uid"]), list(ours))
        non_tensors = {key: value for key, value in self.non_tensors.items() if key != "uid"}
        non_tensors["group_id"] = ours
        non_tensors.update(theirs)
        meta_info = {**self.meta_info, "timing": dict(self.meta_info.get("timing", {}))}
        return DataProto.from_dict(
            tensors=dict(self.tensors), non_tensors=non_tensors, meta_info=meta_info
        )


def to_verl_batch(
    groups: Iterable[Sequence[Trajectory]],
    *,
    pad_token_id: int,
    prompt_length: int | None = None,
    response_length: int | None = None,
    keep_failed: bool = False,
) -> VerlBatch:
    """Pad the samples of `groups` into verl's batch layout.

    `prompt_length` / `response_length` fix the widths (verl's `rollout.prompt_length` and
    `rollout.response_length`); None: the longest in the batch. `keep_failed`: samples lost to
    an infrastructure error stay as rows with an all-zero response mask (what
    `as_gen_output` needs; see `every_row_views`); False: they are left out.

    Raises:
        ValueError: no sample to train on, or one is longer than a fixed width (cutting it
            would train on tokens other than those sampled).
    """
    views = every_row_views(groups) if keep_failed else response_views(groups)
    if not any(sum(view.response_mask) for view in views):
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
        # verl sums rm_scores per row: a row without response tokens keeps its reward at 0
        rm_scores[row, max(r - 1, 0)] = float(view.reward or 0.0)
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
        "__num_turns__": np.array([view.num_turns for view in views], dtype=np.int32),
        # verl's agent loop gives every row one (empty for text); fit iterates over them
        "multi_modal_inputs": _objects({} for _ in views),
    }
    return VerlBatch(tensors, non_tensors, {"pad_token_id": pad_token_id, "timing": _timing(views)})


def _check_same_grouping(theirs: list[Any], ours: list[Any]) -> None:
    """Rows that share a verl uid are one of our groups, and the other way round."""
    pairs = set(zip(theirs, ours, strict=True))
    if len(pairs) != len(set(theirs)) or len(pairs) != len(set(ours)):
        raise ValueError(
            "the rows verl grouped under one uid are not one conductor group: pass the groups "
            "in the order of verl's prompts, one group of rollout.n samples per prompt"
        )


def _timing(views: list[ResponseView]) -> dict[str, float]:
    """What `fit` adds to its step timing (verl's agent loop reports the same names)."""
    generation = [view.generation_s for view in views]
    tools = [view.tool_s for view in views]
    return {
        "agent_loop/generate_sequences/mean": float(np.mean(generation)),
        "agent_loop/generate_sequences/max": float(np.max(generation)),
        "agent_loop/tool_calls/mean": float(np.mean(tools)),
        "agent_loop/tool_calls/max": float(np.max(tools)),
    }


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
