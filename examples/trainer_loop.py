"""A trainer loop on the conductor's batch stream: GRPO advantages, padded tensors, a tiny update.

The conductor drives the simulated engine and envs in virtual time; each training step takes
B complete groups from `conductor.batches()`, turns them into right-padded tensors with
group-normalised advantages, takes one PPO-clip step on a toy policy, and publishes the new
weights (`update_weights`), which interrupts generations in flight; they resume with the new
version. Run it from the repository root:

    .venv/bin/python examples/trainer_loop.py [steps]
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import torch

from rollout import plan_simulation, resolve_policy
from rollout.core.config import TrainerApiConfig
from rollout.jobs.simulation import simulated_conductor
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.tokenizer import ByteTokenizer

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "simulate" / "short_context.yaml"
VOCAB = 512  # a small synthetic vocabulary keeps the toy policy's logits small
CLIP = 0.2  # PPO ratio clip


class ToyPolicy(torch.nn.Module):
    """A bigram model: the next token's logits from the current token's embedding."""

    def __init__(self, vocab: int, width: int = 32) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(input_ids))


def ppo_loss(policy: ToyPolicy, batch: object) -> torch.Tensor:
    """Token-level PPO-clip loss; column t of every tensor refers to `input_ids[:, t]`."""
    ids, mask = batch.input_ids, batch.loss_mask  # type: ignore[attr-defined]
    logits = policy(ids[:, :-1])  # predicts tokens 1..L-1
    new_logprobs = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    ratio = torch.exp(new_logprobs - batch.old_logprobs[:, 1:])  # type: ignore[attr-defined]
    advantages = batch.advantages[:, 1:]  # type: ignore[attr-defined]
    clipped = torch.clamp(ratio, 1 - CLIP, 1 + CLIP)
    per_token = -torch.minimum(ratio * advantages, clipped * advantages) * mask[:, 1:]
    return per_token.sum() / mask[:, 1:].sum().clamp(min=1)


async def train(steps: int) -> list[float]:
    # The plan resolves every setting once: the config, these overrides (a dotted key walks
    # into the file a setting names), B, K and the seed.
    simulation = plan_simulation(
        CONFIG,
        ["groups_per_step=2", "group_size=4", "conductor.timeseries_interval_s=0",
         f"workload.vocab_size={VOCAB}", f"workload.eos_token_id={VOCAB - 1}",
         f"workload.distinct_token_ids={VOCAB - 1}", "workload.turns.median=3"],
    )  # fmt: skip
    policy = ToyPolicy(VOCAB)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    trainer_api = TrainerApiConfig(pad_token_id=0)
    losses: list[float] = []
    async with (
        simulated_conductor(simulation, resolve_policy("conductor")) as conductor,
        contextlib.aclosing(conductor.batches()) as batches,
    ):
        async for batch in batches:
            tensors = batch.train_batch(trainer_api, ByteTokenizer())
            loss = ppo_loss(policy, tensors)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            print(
                f"step {batch.step}: {tensors.num_rows} rows × {tensors.input_ids.shape[1]} "
                f"tokens, staleness {batch.staleness()}, mean reward "
                f"{batch.rewards_mean()}, loss {losses[-1]:+.4f} "
                f"(t = {conductor.clock.now():.0f} s simulated)"
            )
            await conductor.update_weights(batch.policy_version + 1)
            if batch.step == steps:
                break
    return losses


if __name__ == "__main__":
    run_virtual(train(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
