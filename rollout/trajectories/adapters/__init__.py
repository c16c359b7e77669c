"""Finished groups in the shapes the RL trainers people use consume (docs/trainers.md).

Each adapter is a pure function of finished groups: verl's `DataProto` batch, SkyRL's
`GeneratorOutput`, slime's `Sample` records, TRL's `rollout_func` result and a Hugging Face
`datasets.Dataset`. They share `response_view`: a trajectory split into its first prompt and
everything after it, with the loss mask, behaviour logprobs and policy versions aligned on the
response tokens, and the sample's status. Samples with an infrastructure error are left out
(they are not the policy's doing), except where the trainer checks it got one row per sample
it asked for (SkyRL; verl's `fit` with `keep_failed=True`): there they are zero-mask rows
(`every_row_views`). Truncated samples are kept and marked.
"""

from rollout.trajectories.adapters.common import (
    ResponseView,
    SampleStatus,
    complete_groups,
    every_row_views,
    response_view,
    response_views,
)
from rollout.trajectories.adapters.hf_datasets import to_hf_dataset
from rollout.trajectories.adapters.skyrl import (
    SKYRL_GENERATOR_OUTPUT_KEYS,
    SkyRLTrajectoryId,
    to_skyrl_output,
)
from rollout.trajectories.adapters.slime import to_slime_samples
from rollout.trajectories.adapters.trl import to_trl_rollout
from rollout.trajectories.adapters.verl import VerlBatch, to_verl_batch

__all__ = [
    "SKYRL_GENERATOR_OUTPUT_KEYS",
    "ResponseView",
    "SampleStatus",
    "SkyRLTrajectoryId",
    "VerlBatch",
    "complete_groups",
    "every_row_views",
    "response_view",
    "response_views",
    "to_hf_dataset",
    "to_skyrl_output",
    "to_slime_samples",
    "to_trl_rollout",
    "to_verl_batch",
]
