"""verl's own `RayPPOTrainer.fit` steps on the conductor's batch, with verl 0.9.1's real code:
fit sets its `uid`s, splits the generation batch off (`_get_gen_batch`), repeats it `rollout.n`
times, takes the rollout's output, pops its timing, `batch.union(gen_batch_output)`s it, then
reads rewards, computes GRPO advantages and its data metrics (`__num_turns__` included). The
models' forward passes (old log-probs, the update) are the only steps left out: bypass mode
takes the rollout's log-probs, as verl's `rollout_correction.bypass_mode` does."""

from __future__ import annotations

import uuid
from dataclasses import replace

import numpy as np
import pytest
import torch

from rollout.core.types import Trajectory
from rollout.trajectories.adapters import to_verl_batch
from tests.rollout.trajectory_factory import make_group, make_trajectory

PAD = 0
N = 3  # rollout.n


def conductor_groups() -> list[list[Trajectory]]:
    """Two prompts' groups of three; one sample of the second lost to an infra error."""
    first = make_group("p0", [1.0, 0.0, 1.0], turns=3)
    second = make_group("p1", [0.0, 1.0, 1.0], turns=2, version=4)
    second[1] = replace(
        make_trajectory("p1", 1, reward=None, infra_error="agent_sandbox_dead", turns=1),
        group_id="p1",
    )
    return [first, second]


def dataloader_batch() -> object:
    """What verl's dataloader yields for two prompts: `RLHFDataset.__getitem__`'s rows (the
    raw prompt and a dummy tensor: the agent loop tokenizes) through verl's `collate_fn`."""
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    rows = [
        {
            "data_source": "swe",
            "prompt": [{"role": "user", "content": f"fix bug {index}"}],
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {"index": index},
            "raw_prompt": [{"role": "user", "content": f"fix bug {index}"}],
            "dummy_tensor": torch.tensor([0], dtype=torch.uint8),
            "index": index,
            "tools_kwargs": {},
            "interaction_kwargs": {},
        }
        for index in range(2)
    ]
    return DataProto.from_single_dict(collate_fn(rows))


def test_the_rollout_output_goes_through_fits_own_steps_unchanged() -> None:
    from verl.trainer.ppo.metric_utils import compute_data_metrics, compute_timing_metrics
    from verl.trainer.ppo.ray_trainer import (
        AdvantageEstimator,
        RayPPOTrainer,
        compute_advantage,
        compute_response_mask,
    )
    from verl.trainer.ppo.reward import extract_reward

    # -- fit, up to generate_sequences ------------------------------------------------------
    batch = dataloader_batch()
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch.batch))], dtype=object
    )
    gen_batch = RayPPOTrainer._get_gen_batch(None, batch)  # fit's own split (self unused)
    gen_batch_output = gen_batch.repeat(repeat_times=N, interleave=True)
    # -- the conductor in place of async_rollout_manager.generate_sequences -----------------
    rollout = to_verl_batch(conductor_groups(), pad_token_id=PAD, keep_failed=True)
    combined_gen_output = rollout.as_gen_output(gen_batch_output)
    # -- fit, after it ----------------------------------------------------------------------
    timing_raw: dict[str, float] = {"step": 1.0, "gen": 0.5}
    timing_raw.update(combined_gen_output.meta_info["timing"])
    combined_gen_output.meta_info.pop("timing", None)
    gen_batch_output = combined_gen_output.slice(0, len(gen_batch_output))
    batch = batch.repeat(repeat_times=N, interleave=True)
    batch = batch.union(gen_batch_output)
    if "response_mask" not in batch.batch.keys():  # noqa: SIM118 (fit's own line)
        batch.batch["response_mask"] = compute_response_mask(batch)
    batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
    images_seqlens = []
    for multi_modal_input in batch.non_tensor_batch["multi_modal_inputs"]:
        if "image_grid_thw" not in multi_modal_input.keys():  # noqa: SIM118
            continue
        images_seqlens.extend(multi_modal_input["images_seqlens"].tolist())
    reward_tensor, reward_extra_infos = extract_reward(batch)
    batch.batch["old_log_probs"] = batch.batch["rollout_log_probs"]  # bypass mode
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    batch = compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO, num_repeat=N)
    metrics = compute_data_metrics(batch=batch, use_critic=False)
    metrics.update(compute_timing_metrics(batch=batch, timing_raw=timing_raw))

    # -- what the trainer holds -------------------------------------------------------------
    assert len(batch) == 2 * N and reward_extra_infos == {}
    uids = list(batch.non_tensor_batch["uid"])
    assert uids[:N] == [uids[0]] * N and uids[N:] == [uids[N]] * N and uids[0] != uids[N]
    assert list(batch.non_tensor_batch["group_id"]) == ["p0"] * N + ["p1"] * N
    scores = batch.batch["token_level_rewards"].sum(-1).tolist()
    assert scores == pytest.approx([1.0, 0.0, 1.0, 0.0, 0.5, 1.0])  # the failed row: group mean
    failed = batch.batch["response_mask"][4]
    assert failed.sum() == 0 and torch.all(batch.batch["advantages"][4] == 0)
    first_group = batch.batch["advantages"][:N].sum(-1)
    assert first_group[0] > 0 > first_group[1]  # rewarded above the group mean, and below
    assert metrics["num_turns/max"] == 3 and metrics["num_turns/min"] == 1
    assert metrics["timing_s/agent_loop/generate_sequences/max"] > 0
    assert "timing" not in batch.meta_info


def test_rows_verl_grouped_differently_are_refused() -> None:
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    batch = dataloader_batch()
    batch.non_tensor_batch["uid"] = np.array(["u0", "u1"], dtype=object)
    gen_batch = RayPPOTrainer._get_gen_batch(None, batch)
    shuffled = gen_batch.repeat(repeat_times=N, interleave=False)  # u0 u1 u0 u1 ...
    rollout = to_verl_batch(conductor_groups(), pad_token_id=PAD, keep_failed=True)
    with pytest.raises(ValueError, match="not one conductor group"):
        rollout.as_gen_output(shuffled)
    with pytest.raises(ValueError, match="keep_failed=True"):
        to_verl_batch(conductor_groups(), pad_token_id=PAD).as_gen_output(
            gen_batch.repeat(repeat_times=N, interleave=True)
        )
