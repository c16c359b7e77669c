"""One training batch from the conductor on the simulated engine (shared by these examples).

In training you take batches from your own run's `conductor.batches()` (see
examples/batch_stream.py) or read a run directory's trajectories.jsonl with
`rollout.trajectories.writers.read_jsonl_groups`.
"""

import contextlib
from pathlib import Path

from rollout import plan_simulation, resolve_policy
from rollout.jobs.simulation import simulated_conductor
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.batch import Batch

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "simulate" / "short_context.yaml"


def first_batch(*overrides: str) -> Batch:
    """B complete groups of K samples, in virtual time (a few seconds); `overrides` are
    `key=value` settings of the simulation (e.g. a smaller workload vocabulary)."""

    async def take() -> Batch:
        simulation = plan_simulation(CONFIG, list(overrides))
        async with (
            simulated_conductor(simulation, resolve_policy("conductor")) as conductor,
            contextlib.aclosing(conductor.batches()) as batches,
        ):
            return await anext(batches)

    return run_virtual(take())
