"""The rollout layer: staleness-bounded admission, critical-group scheduling, the action-level
agent loop, engines, exact-token trajectories.

Its rooms, lowest layer first (each may import only the ones before it; `make lint` checks this
with import-linter contracts in pyproject.toml):

* `core/`: the pure decision core: data model, admission, scheduler and its events, critical
  groups, live-KV gate, length predictors. No I/O, no clock, no asyncio.
* `trajectories/`: exact token records: tokenizers and the append-only prompt builder, the
  trajectory builder, sink, writers, batches and the trainer API.
* `engines/`: the `Engine` protocol (`base.py`) and its implementations (`sim/`).
* `observe/`: run directories, records, metrics, the report and its plots.
* `runtime/`: the asyncio shell: conductor, agent loop, dispatcher, env sessions.
* `sim/`: simulation only: virtual time, synthetic workloads, the scripted SWE agent, the
  simulated trainer, the simulated side of a run.
* `jobs/`: what `conductor run` and `conductor simulate` wire together: their configs, the
  policy presets, one simulated run, the SWE run.
* `cli/`: the `conductor` command.

Start from `Conductor` (it owns one run) and its trainer interface, `Conductor.batches()`.
Names are loaded on first use, so importing one core module (say `rollout.core.scheduler`) does
not import the whole shell.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rollout.core.admission import AdmissionController
    from rollout.core.config import RolloutConfig
    from rollout.core.scheduler import RolloutScheduler
    from rollout.core.types import Group, Sample, SampleProgress, Trajectory, Turn
    from rollout.errors import RolloutError
    from rollout.jobs.config import RunConfig, SimulateConfig
    from rollout.jobs.policies import builtin_policies, resolve_policy
    from rollout.jobs.simulation import simulate_policy
    from rollout.jobs.simulation_plan import load_simulation, plan_simulation
    from rollout.observe.recorder import RunRecorder
    from rollout.observe.run_summary import RunSummary
    from rollout.runtime.agent_loop import AgentLoop
    from rollout.runtime.conductor import Conductor, ConductorStats
    from rollout.runtime.config import AgentLoopConfig, ConductorConfig, PolicyConfig
    from rollout.runtime.env_session import (
        ActOutcome,
        EnvSession,
        EnvSessionError,
        SampleRef,
        SessionFactory,
        TextEnvSession,
    )
    from rollout.runtime.loop_host import GenerationTicket, LoopHost
    from rollout.runtime.pool_sessions import PooledEnv, PoolSessions
    from rollout.simulation.sessions import SimEnvSession, SimWorkloadSessions
    from rollout.standins.config import TrainerSimConfig
    from rollout.standins.trainer import SimulatedTrainer
    from rollout.trajectories.batch import Batch
    from rollout.trajectories.sink import TrajectorySink
    from rollout.trajectories.tokenizer import ByteTokenizer, ChatPromptBuilder

__all__ = [
    "ActOutcome",
    "AdmissionController",
    "AgentLoop",
    "AgentLoopConfig",
    "Batch",
    "ByteTokenizer",
    "ChatPromptBuilder",
    "Conductor",
    "ConductorConfig",
    "ConductorStats",
    "EnvSession",
    "EnvSessionError",
    "GenerationTicket",
    "Group",
    "LoopHost",
    "PolicyConfig",
    "PoolSessions",
    "PooledEnv",
    "RolloutConfig",
    "RolloutError",
    "RolloutScheduler",
    "RunConfig",
    "RunRecorder",
    "RunSummary",
    "Sample",
    "SampleProgress",
    "SampleRef",
    "SessionFactory",
    "SimEnvSession",
    "SimWorkloadSessions",
    "SimulateConfig",
    "SimulatedTrainer",
    "TextEnvSession",
    "TrainerSimConfig",
    "Trajectory",
    "TrajectorySink",
    "Turn",
    "builtin_policies",
    "load_simulation",
    "plan_simulation",
    "resolve_policy",
    "simulate_policy",
]

_HOMES = {
    "ActOutcome": "rollout.runtime.env_session",
    "AdmissionController": "rollout.core.admission",
    "AgentLoop": "rollout.runtime.agent_loop",
    "AgentLoopConfig": "rollout.runtime.config",
    "Batch": "rollout.trajectories.batch",
    "ByteTokenizer": "rollout.trajectories.tokenizer",
    "ChatPromptBuilder": "rollout.trajectories.tokenizer",
    "Conductor": "rollout.runtime.conductor",
    "ConductorConfig": "rollout.runtime.config",
    "ConductorStats": "rollout.runtime.conductor",
    "EnvSession": "rollout.runtime.env_session",
    "EnvSessionError": "rollout.runtime.env_session",
    "GenerationTicket": "rollout.runtime.loop_host",
    "Group": "rollout.core.types",
    "LoopHost": "rollout.runtime.loop_host",
    "PolicyConfig": "rollout.runtime.config",
    "PoolSessions": "rollout.runtime.pool_sessions",
    "PooledEnv": "rollout.runtime.pool_sessions",
    "RolloutConfig": "rollout.core.config",
    "RolloutError": "rollout.errors",
    "RolloutScheduler": "rollout.core.scheduler",
    "RunConfig": "rollout.jobs.config",
    "RunRecorder": "rollout.observe.recorder",
    "RunSummary": "rollout.observe.run_summary",
    "Sample": "rollout.core.types",
    "SampleProgress": "rollout.core.types",
    "SampleRef": "rollout.runtime.env_session",
    "SessionFactory": "rollout.runtime.env_session",
    "SimEnvSession": "rollout.simulation.sessions",
    "SimWorkloadSessions": "rollout.simulation.sessions",
    "SimulateConfig": "rollout.jobs.config",
    "SimulatedTrainer": "rollout.standins.trainer",
    "TextEnvSession": "rollout.runtime.env_session",
    "TrainerSimConfig": "rollout.standins.config",
    "Trajectory": "rollout.core.types",
    "TrajectorySink": "rollout.trajectories.sink",
    "Turn": "rollout.core.types",
    "builtin_policies": "rollout.jobs.policies",
    "load_simulation": "rollout.jobs.simulation_plan",
    "plan_simulation": "rollout.jobs.simulation_plan",
    "resolve_policy": "rollout.jobs.policies",
    "simulate_policy": "rollout.jobs.simulation",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rollout' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(__all__)
