"""The TRL adapter through TRL's real `GRPOTrainer`: one training step on CPU whose
`rollout_func` returns `to_trl_rollout` of finished groups (a tiny random model, offline)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rollout.core.types import Trajectory
from rollout.trajectories.adapters import to_trl_rollout
from rollout.trajectories.tokenizer import ByteTokenizer
from tests.rollout.trajectory_factory import make_group

K = 2  # TRL's num_generations = the conductor's group size


def _groups(count: int) -> list[list[Trajectory]]:
    return [make_group(f"g{i}", [1.0, 0.0], turns=2) for i in range(count)]


def test_grpo_trainer_takes_a_step_on_the_adapters_rollout(tmp_path: Path) -> None:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from tokenizers import Tokenizer, models
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    vocab_size = ByteTokenizer().vocab_size  # the factory's ids: one word per id here
    words = {f"<{i}>": i for i in range(vocab_size)}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab=words, unk_token="<0>")),
        pad_token=f"<{ByteTokenizer().pad_token_id}>",
        eos_token=f"<{ByteTokenizer().eos_token_id}>",
        unk_token="<0>",
    )
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=vocab_size, n_positions=512, n_embd=16, n_layer=1, n_head=2)
    )
    served: list[dict[str, list[object]]] = []

    def rollout_func(prompts: list[object], trainer: object) -> dict[str, list[object]]:
        # TRL passes each prompt num_generations times in a row: one completion per entry.
        output = to_trl_rollout(_groups(len(prompts) // K), num_generations=K)
        served.append(output)
        return output

    def env_reward(completions: object, env_reward: list[float], **_: object) -> list[float]:
        return env_reward

    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=2 * K, num_generations=K,
        max_steps=1, report_to=[], use_cpu=True, logging_steps=1, save_strategy="no",
        max_completion_length=256,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[env_reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["task"] * 8}),
        processing_class=tokenizer,
        rollout_func=rollout_func,
    )
    trainer.train()
    [logged, *_] = trainer.state.log_history
    assert logged["reward"] == pytest.approx(0.5)  # each group: one 1.0 and one 0.0
    model_tokens = [sum(mask) for mask in served[0]["env_mask"]]  # type: ignore[arg-type]
    assert logged["completions/mean_length"] == pytest.approx(sum(model_tokens) / len(model_tokens))
