"""TRL: one `GRPOTrainer` step whose `rollout_func` returns the conductor's groups.

A tiny random model and a word-per-id tokenizer stand in for yours, so this runs on a CPU with
nothing downloaded. TRL passes each prompt num_generations times; return that many groups.
Run: `.venv/bin/python examples/trainers/trl_grpo.py` (needs trl).
"""

import os
import tempfile

from datasets import Dataset
from simulated_batch import first_batch
from tokenizers import Tokenizer, models
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer

from rollout.trajectories.adapters import to_trl_rollout

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
# A 512-id workload vocabulary keeps the toy model's logits small (a real one has ~150k).
VOCAB = 512
small = f"vocab_size={VOCAB}, eos_token_id={VOCAB - 1}, distinct_token_ids={VOCAB - 1}"
groups = first_batch(f"workload.overrides=[{small}]").groups
K = len(groups[0])  # the conductor's group size is TRL's num_generations
words = {f"<{i}>": i for i in range(VOCAB)}  # a word per id: any tokenizer of yours will do
tokenizer = PreTrainedTokenizerFast(
    tokenizer_object=Tokenizer(models.WordLevel(words, "<0>")),
    pad_token="<0>", eos_token="<1>", unk_token="<0>",
)  # fmt: skip
model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=8192, n_embd=16,
                                   n_layer=1, n_head=2))  # fmt: skip


def rollout_func(prompts, trainer):
    return to_trl_rollout(groups[: len(prompts) // K], num_generations=K)


def env_reward(completions, env_reward, **_):
    return env_reward


with tempfile.TemporaryDirectory() as out:
    args = GRPOConfig(output_dir=out, per_device_train_batch_size=K, num_generations=K,
                      max_steps=1, report_to=[], use_cpu=True, logging_steps=1,
                      save_strategy="no", max_completion_length=8192)  # fmt: skip
    trainer = GRPOTrainer(model=model, reward_funcs=[env_reward], args=args,
                          train_dataset=Dataset.from_dict({"prompt": ["task"] * 8}),
                          processing_class=tokenizer, rollout_func=rollout_func)  # fmt: skip
    trainer.train()
print(f"TRL GRPOTrainer step done; reward {trainer.state.log_history[0]['reward']:.3f}")
