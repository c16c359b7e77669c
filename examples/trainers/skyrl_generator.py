"""SkyRL: a generator whose `generate` returns the conductor's samples as `GeneratorOutput`.

Subclass `skyrl.train.generators.base.GeneratorInterface` (SkyRL 0.4) in your code and return
`to_skyrl_output(...)` from `generate` (one row per prompt SkyRL sent: a sample lost to an
infrastructure error is a zero-mask row); pass `make_trajectory_id=TrajectoryID` for SkyRL's own
id type. Run: `.venv/bin/python examples/trainers/skyrl_generator.py`.
"""

import asyncio

from simulated_batch import first_batch

from rollout.trajectories.adapters import to_skyrl_output

GROUPS = first_batch().groups  # in training: await the next batch of your conductor here


class ConductorGenerator:  # in SkyRL: class ConductorGenerator(GeneratorInterface)
    """Hands SkyRL the groups of one conductor batch per call."""

    async def generate(self, input_batch: dict) -> dict:
        return to_skyrl_output(GROUPS)


output = asyncio.run(ConductorGenerator().generate({}))
print(f"SkyRL GeneratorOutput: {len(output['response_ids'])} responses, keys {sorted(output)}")
