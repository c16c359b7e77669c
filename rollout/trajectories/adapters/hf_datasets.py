"""Hugging Face `datasets`: an Arrow `Dataset` of finished samples, for offline training.

One row per sample with explicit features, so dtypes survive `save_to_disk` / `push_to_hub`
and a reload: token ids and the mask as int32 sequences, logprobs float32, versions int32,
reward float32 (null for failures, kept only with `keep_failed`). Needs `pip install datasets`
(the `trainers` extra).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rollout.core.types import Trajectory
from rollout.trajectories.adapters.common import response_views

__all__ = ["to_hf_dataset"]


def to_hf_dataset(groups: Iterable[Sequence[Trajectory]], *, keep_failed: bool = False) -> Any:
    """A `datasets.Dataset` of the samples of `groups` (infrastructure failures left out)."""
    import datasets  # deferred: an optional dependency

    views = response_views(groups, keep_failed=keep_failed)
    int_seq = datasets.Sequence(datasets.Value("int32"))
    features = datasets.Features(
        {
            "sample_id": datasets.Value("string"),
            "group_id": datasets.Value("string"),
            "prompt_index": datasets.Value("int64"),
            "sample_index": datasets.Value("int32"),
            "prompt_ids": int_seq,
            "response_ids": int_seq,
            "response_mask": datasets.Sequence(datasets.Value("int8")),
            "response_logprobs": datasets.Sequence(datasets.Value("float32")),
            "response_versions": int_seq,
            "reward": datasets.Value("float32"),
            "status": datasets.Value("string"),
            "stop_reason": datasets.Value("string"),
            "num_turns": datasets.Value("int32"),
        }
    )
    columns: dict[str, list[Any]] = {name: [] for name in features}
    for view in views:
        for name in features:
            value = getattr(view, name)
            columns[name].append(list(value) if isinstance(value, tuple) else value)
    return datasets.Dataset.from_dict(columns, features=features)
