"""Train on the conductor's batch stream: B complete groups a step, exact tokens, new weights.

The simulated engine and envs play the model and the world, in virtual time. Run it from the
repository root: `.venv/bin/python examples/batch_stream.py`
"""

import contextlib
from pathlib import Path

from rollout import plan_simulation, resolve_policy
from rollout.core.config import TrainerApiConfig
from rollout.jobs.simulation import simulated_conductor
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.tokenizer import ByteTokenizer

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "simulate" / "short_context.yaml"


async def main(steps: int = 2) -> None:
    simulation = plan_simulation(CONFIG)
    async with (
        simulated_conductor(simulation, resolve_policy("conductor")) as conductor,
        contextlib.aclosing(conductor.batches()) as batches,
    ):
        async for batch in batches:  # B complete groups, K samples each
            tensors = batch.train_batch(TrainerApiConfig(), ByteTokenizer())
            # ... your optimizer step on tensors.input_ids, loss_mask, old_logprobs, advantages
            print(f"step {batch.step}: {tensors.num_rows} rows, reward {batch.rewards_mean()}")
            await conductor.update_weights(batch.policy_version + 1)  # interrupts generations
            if batch.step == steps:
                break


if __name__ == "__main__":
    run_virtual(main())
