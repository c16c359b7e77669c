"""Spec of the stall guard: a simulated engine that holds requests and computes nothing for
`stall_after_s` fails the run with a clear error instead of running for ever."""

from __future__ import annotations

import asyncio

import pytest

from foundation.errors import ConfigError
from rollout.engines.sim.batcher import Batcher
from rollout.jobs.simulation import simulate_policy
from rollout.jobs.simulation_plan import plan_simulation
from rollout.simulation.stall_guard import SimulationStalled, StallGuard
from rollout.simulation.vtime import run_virtual
from tests.paths import CONFIGS

SHORT = CONFIGS / "simulate" / "short_context.yaml"
SMALL = ["steps=1", "groups_per_step=2", "group_size=2", "trainer.train_time_s=1"]


def _record(t_s: float, *, waiting: int, running: int, busy_s: float) -> dict[str, object]:
    return {"t_s": t_s, "engine": "sim", "waiting": waiting, "running": running, "busy_s": busy_s}


def test_requests_waiting_with_nothing_computed_for_the_bound_stall_the_run() -> None:
    guard = StallGuard(100.0)
    for t_s in (0.0, 50.0, 99.0):
        guard.record(_record(t_s, waiting=2, running=0, busy_s=7.0))
    stalled = r"2 requests waiting and 0 admitted.*100 virtual seconds"
    with pytest.raises(SimulationStalled, match=stalled):
        guard.record(_record(100.0, waiting=2, running=0, busy_s=7.0))


def test_any_progress_or_an_empty_queue_restarts_the_count() -> None:
    guard = StallGuard(100.0)
    guard.record(_record(0.0, waiting=1, running=0, busy_s=1.0))
    guard.record(_record(90.0, waiting=1, running=0, busy_s=1.5))  # it computed something
    guard.record(_record(180.0, waiting=1, running=0, busy_s=1.5))
    guard.record(_record(185.0, waiting=0, running=0, busy_s=1.5))  # nothing asked of it
    guard.record(_record(280.0, waiting=1, running=0, busy_s=1.5))
    guard.record(_record(300.0, waiting=3, running=1, busy_s=2.0))  # it runs a request
    guard.record(_record(350.0, waiting=0, running=1, busy_s=2.0))
    guard.record(_record(399.0, waiting=0, running=1, busy_s=2.0))
    with pytest.raises(SimulationStalled, match="0 requests waiting and 1 admitted"):
        guard.record(_record(400.0, waiting=0, running=1, busy_s=2.0))  # admitted, stuck


def test_a_bound_below_the_trainers_step_is_refused() -> None:
    with pytest.raises(ConfigError, match="stall_after_s"):
        plan_simulation(SHORT, [*SMALL, "trainer.train_time_s=60", "stall_after_s=30"])


def test_a_simulation_whose_engine_admits_nothing_fails_instead_of_running_for_ever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A deadlock stands in as an engine that never admits a request (not one computed token):
    the run stops with `SimulationStalled`, in virtual time, long before the test's bound."""
    monkeypatch.setattr(Batcher, "_admit", lambda self, head, now, reserve, chunks: None)
    simulation = plan_simulation(SHORT, [*SMALL, "stall_after_s=100", "policies=[conductor]"])

    async def main() -> None:
        await asyncio.wait_for(simulate_policy(simulation, simulation.policies[0]), 10_000.0)

    with pytest.raises(SimulationStalled, match="computed nothing for 100 virtual seconds"):
        run_virtual(main())
