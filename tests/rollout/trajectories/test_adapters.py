"""Trainer adapters: every response token keeps its id, logprob and mask on the same position
in every trainer's layout; infrastructure failures are left out, truncations marked; shapes,
dtypes and field lists as each trainer defines them.

verl's `DataProto` (verl installed without its training stack) and Hugging Face `datasets` are
tested through their real types here, verl's `fit` steps in test_adapters_verl_fit.py and
SkyRL's own validator in test_adapters_skyrl.py; slime's field list is copied below from its
source, with the file named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch

from rollout.core.types import NO_VERSION, Trajectory
from rollout.trajectories.adapters import (
    SKYRL_GENERATOR_OUTPUT_KEYS,
    SkyRLTrajectoryId,
    response_view,
    to_hf_dataset,
    to_skyrl_output,
    to_slime_samples,
    to_trl_rollout,
    to_verl_batch,
)
from tests.rollout.trajectory_factory import make_group, make_trajectory

PAD = 0

# slime/utils/types.py, @dataclass class Sample (the fields a record may set)
SLIME_SAMPLE_FIELDS = {
    "group_index", "index", "prompt", "tokens", "multimodal_inputs", "multimodal_train_inputs",
    "response", "response_length", "label", "reward", "loss_mask", "weight_versions",
    "rollout_log_probs", "rollout_routed_experts", "remove_sample", "teacher_log_probs",
    "mopd_teacher_log_probs", "status", "metadata", "generate_function_path", "train_metadata",
    "session_id", "non_generation_time", "spec_info", "prefix_cache_info",
}  # fmt: skip
SLIME_STATUS_VALUES = {"pending", "completed", "truncated", "aborted", "failed"}
# verl/experimental/agent_loop/agent_loop.py, AgentLoopWorker._postprocess: the batch tensors
VERL_BATCH_KEYS = {
    "prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids",
    "rollout_log_probs", "rm_scores",
}  # fmt: skip


def groups() -> list[list[Trajectory]]:
    """Two groups of three: multi-turn samples of different lengths (so rows pad), one
    truncated at its turn limit, one lost to an infrastructure error."""
    first = make_group("g1", [1.0, 0.0, 1.0], turns=3)
    first[1] = replace(
        first[1], terminated=False, truncated=True, info={"truncation_reason": "max_turns"}
    )
    second = make_group("g2", [0.0, 1.0, 1.0], turns=2, version=4)
    second[2] = make_trajectory("g2", 2, reward=None, infra_error="agent_sandbox_dead", turns=1)
    return [first, second]


def trainable() -> list[Trajectory]:
    return [t for group in groups() for t in group if t.infra_error is None]


Position = tuple[int, float, int]  # (token id, behaviour logprob, loss mask) of one response token


def positions(ids: Sequence[int], logprobs: Sequence[float], mask: Sequence[int]) -> list[Position]:
    """An adapter's response positions, one (id, logprob, mask) per token."""
    return list(zip(ids, logprobs, mask, strict=True))


def expected(trajectory: Trajectory, abs_tolerance: float | None = None) -> list[object]:
    """The trajectory's response positions, logprobs compared with `pytest.approx`."""
    cut = trajectory.prompt_tokens
    return [
        (token, pytest.approx(logprob, abs=abs_tolerance), mask)
        for token, logprob, mask in positions(
            trajectory.token_ids[cut:], trajectory.logprobs[cut:], trajectory.loss_mask[cut:]
        )
    ]


def test_the_split_keeps_the_prompt_free_of_trained_tokens() -> None:
    for trajectory in trainable():
        view = response_view(trajectory)
        assert view.trajectory_tokens == trajectory.token_ids
        assert sum(view.response_mask) == trajectory.num_generated_tokens
        assert len(view.prompt_ids) == trajectory.prompt_tokens


def test_verl_rows_keep_every_response_token_aligned() -> None:
    batch = to_verl_batch(groups(), pad_token_id=PAD)
    width_p = batch.tensors["prompts"].shape[1]
    for row, trajectory in enumerate(trainable()):
        length = len(trajectory.token_ids) - trajectory.prompt_tokens
        got = positions(
            batch.tensors["responses"][row, :length].tolist(),
            batch.tensors["rollout_log_probs"][row, :length].tolist(),
            batch.tensors["response_mask"][row, :length].tolist(),
        )
        assert expected(trajectory) == got
        real = batch.tensors["attention_mask"][row].bool()
        assert batch.tensors["input_ids"][row][real].tolist() == list(trajectory.token_ids)
        # positions count real tokens: the first response token sits at the prompt's length
        assert batch.tensors["position_ids"][row, width_p].item() == trajectory.prompt_tokens
        generated = batch.tensors["rollout_versions"][row, :length]
        mask = batch.tensors["response_mask"][row, :length].bool()
        assert set(generated[mask].tolist()) <= {0, 4} and set(generated[~mask].tolist()) <= {
            NO_VERSION
        }


def test_verl_layout_shapes_dtypes_padding_and_reward_position() -> None:
    batch = to_verl_batch(groups(), pad_token_id=PAD)
    tensors, views = batch.tensors, [response_view(t) for t in trainable()]
    assert set(tensors) >= VERL_BATCH_KEYS
    rows, width_p = tensors["prompts"].shape
    width_r = tensors["responses"].shape[1]
    assert rows == len(views) == len(batch) == 5
    assert width_p == max(len(v.prompt_ids) for v in views)
    assert width_r == max(len(v.response_ids) for v in views)
    assert (
        tensors["input_ids"].shape == tensors["attention_mask"].shape == (rows, width_p + width_r)
    )
    for name in ("prompts", "responses", "response_mask", "input_ids", "position_ids"):
        assert tensors[name].dtype == torch.int64, name
    for name in ("rollout_log_probs", "rm_scores"):
        assert tensors[name].dtype == torch.float32, name
    for row, view in enumerate(views):
        pad = width_p - len(view.prompt_ids)
        assert tensors["prompts"][row, :pad].tolist() == [PAD] * pad  # left-padded prompt
        last = len(view.response_ids) - 1  # the reward sits on the last real response token
        assert tensors["rm_scores"][row].nonzero().flatten().tolist() == (
            [last] if view.reward else []
        )
        assert tensors["rm_scores"][row, last].item() == pytest.approx(view.reward or 0.0)
    assert list(batch.non_tensors["uid"]) == [v.group_id for v in views]
    assert batch.non_tensors["__num_turns__"].dtype == np.int32  # verl's name and dtype
    assert list(batch.non_tensors["status"]).count("truncated") == 1
    assert "max_turns" in list(batch.non_tensors["stop_reason"])


def test_verl_refuses_to_cut_sampled_tokens_to_a_fixed_width() -> None:
    with pytest.raises(ValueError, match="response_length"):
        to_verl_batch(groups(), pad_token_id=PAD, response_length=3)
    fixed = to_verl_batch(groups(), pad_token_id=PAD, prompt_length=64, response_length=256)
    assert fixed.tensors["input_ids"].shape == (5, 64 + 256)


def test_the_verl_batch_is_a_real_dataproto_with_verls_own_positions() -> None:
    """verl is installed without its training stack (`--no-deps`, see the Makefile)."""
    from verl import DataProto
    from verl.utils.model import compute_position_id_with_mask

    batch = to_verl_batch(groups(), pad_token_id=PAD)
    proto = batch.to_dataproto()
    assert isinstance(proto, DataProto) and len(proto) == 5
    assert torch.equal(proto.batch["input_ids"], batch.tensors["input_ids"])
    assert list(proto.non_tensor_batch["uid"]) == ["g1", "g1", "g1", "g2", "g2"]
    expected_positions = compute_position_id_with_mask(batch.tensors["attention_mask"])
    assert torch.equal(expected_positions, proto.batch["position_ids"])
    first_group = proto.select_idxs([0, 1, 2])
    assert set(first_group.non_tensor_batch["uid"]) == {"g1"}


def test_skyrl_generator_output_has_skyrls_keys_and_aligned_lists() -> None:
    output = to_skyrl_output(groups())
    assert list(output) == list(SKYRL_GENERATOR_OUTPUT_KEYS)
    every = [t for group in groups() for t in group]
    for i, trajectory in enumerate(every):
        assert output["prompt_token_ids"][i] == list(
            trajectory.token_ids[: trajectory.prompt_tokens]
        )
        if trajectory.infra_error is None:
            got = positions(
                output["response_ids"][i], output["rollout_logprobs"][i], output["loss_masks"][i]
            )
            assert got == expected(trajectory)
            assert output["rewards"][i] == trajectory.reward
    assert output["trajectory_ids"][0] == SkyRLTrajectoryId("g1", 0)
    assert output["stop_reasons"].count("max_turns") == 1
    assert output["is_last_step"] is None and len(output["trajectory_time_splits"]["llm"]) == 6


def test_a_sample_lost_to_an_infra_error_is_a_zero_mask_row_at_its_groups_mean() -> None:
    """SkyRL checks it got one row per prompt it sent: the failed sample stays, untrainable."""
    output = to_skyrl_output(groups(), pad_token_id=PAD)
    failed = output["stop_reasons"].index("infra_error")
    assert failed == 5 and len(output["response_ids"]) == 6
    assert output["response_ids"][failed] and set(output["loss_masks"][failed]) == {0}
    assert set(output["rollout_logprobs"][failed]) == {0.0}
    assert output["rewards"][failed] == pytest.approx((0.0 + 1.0) / 2)  # its live siblings
    assert output["rollout_metrics"]["failed"] == 1


def test_slime_samples_use_slimes_fields_and_cover_the_response_only() -> None:
    samples = to_slime_samples(groups())
    assert len(samples) == 5
    for sample, trajectory in zip(samples, trainable(), strict=True):
        assert set(sample) <= SLIME_SAMPLE_FIELDS and sample["status"] in SLIME_STATUS_VALUES
        assert sample["tokens"] == list(trajectory.token_ids)
        n = sample["response_length"]
        got = positions(sample["tokens"][-n:], sample["rollout_log_probs"], sample["loss_mask"])
        assert got == expected(trajectory)
    assert [s["status"] for s in samples].count("truncated") == 1
    assert samples[3]["weight_versions"] == ["4"] and samples[3]["group_index"] == 1
    kept = to_slime_samples(groups(), keep_failed=True)
    assert [s["remove_sample"] for s in kept] == [False] * 5 + [True]
    assert kept[-1]["status"] == "failed"


def test_trl_rollout_has_the_required_keys_and_drops_groups_with_a_failure() -> None:
    output = to_trl_rollout(groups(), num_generations=3)
    assert {"prompt_ids", "completion_ids", "logprobs"} <= set(output)
    assert output["group_id"] == ["g1"] * 3  # g2 lost a sample: TRL needs all 3 in a row
    for i, trajectory in enumerate(groups()[0]):
        got = positions(output["completion_ids"][i], output["logprobs"][i], output["env_mask"][i])
        assert got == expected(trajectory)
    assert output["env_reward"] == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="num_generations"):
        to_trl_rollout(groups(), num_generations=4)


def test_the_hf_dataset_round_trips_with_its_dtypes(tmp_path: Path) -> None:
    dataset = to_hf_dataset(groups())
    assert isinstance(dataset, datasets.Dataset) and dataset.num_rows == 5
    assert dataset.features["response_logprobs"].feature.dtype == "float32"
    assert dataset.features["response_ids"].feature.dtype == "int32"
    dataset.save_to_disk(str(tmp_path / "ds"))
    loaded = datasets.load_from_disk(str(tmp_path / "ds"))
    for row, trajectory in zip(loaded, trainable(), strict=True):
        got = positions(row["response_ids"], row["response_logprobs"], row["response_mask"])
        assert got == expected(trajectory, abs_tolerance=1e-6)
    assert loaded["status"].count("truncated") == 1
    assert to_hf_dataset(groups(), keep_failed=True)["reward"][-1] is None
