"""Hand the conductor's batches to verl, SkyRL, slime, TRL or a Hugging Face dataset.

Each adapter turns B complete groups into what that trainer consumes, with the sampled ids,
behaviour logprobs, loss masks and policy versions aligned (docs/trainers.md). The simulated
engine and envs play the model and the world, in virtual time. Run it from the repository
root: `.venv/bin/python examples/trainer_adapters.py`
"""

import contextlib
from pathlib import Path

from rollout import plan_simulation, resolve_policy
from rollout.jobs.simulation import simulated_conductor
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.adapters import (
    to_hf_dataset,
    to_skyrl_output,
    to_slime_samples,
    to_trl_rollout,
    to_verl_batch,
)

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "simulate" / "short_context.yaml"


async def main() -> None:
    simulation = plan_simulation(CONFIG)
    async with (
        simulated_conductor(simulation, resolve_policy("conductor")) as conductor,
        contextlib.aclosing(conductor.batches()) as batches,
    ):
        batch = await anext(batches)
        group_size = len(batch.groups[0])
        verl = to_verl_batch(batch.groups, pad_token_id=0)  # .to_dataproto() with verl installed
        print("verl:", {name: tuple(t.shape) for name, t in verl.tensors.items()})
        skyrl = to_skyrl_output(batch.groups)  # return it from your GeneratorInterface.generate
        print("skyrl:", len(skyrl["response_ids"]), "responses, rewards", skyrl["rewards"][:4])
        slime = to_slime_samples(batch.groups)  # Sample.from_dict(record) in your rollout fn
        print("slime:", len(slime), "samples, status", sorted({s["status"] for s in slime}))
        trl = to_trl_rollout(batch.groups, num_generations=group_size)  # from rollout_func
        print("trl:", len(trl["completion_ids"]), "completions of", group_size, "per prompt")
        dataset = to_hf_dataset(batch.groups)  # .save_to_disk(...) or .push_to_hub(...)
        print("hf:", dataset.num_rows, "rows,", len(dataset.column_names), "columns")


if __name__ == "__main__":
    run_virtual(main())
