"""The rollout layer: admission, scheduling, the action-level agent loop, the conductor, the sink.

Start from `Conductor` (it owns one run) and its trainer interface, `Conductor.batches()`;
`rollout.policies` holds the policies and baselines, `rollout.simulation` runs them in virtual
time. Names are loaded on first use, so importing one core module (say `rollout.scheduler`)
does not import the whole shell.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rollout.admission import AdmissionController
    from rollout.agent_loop import AgentLoop
    from rollout.batch import Batch
    from rollout.conductor import Conductor, ConductorStats
    from rollout.config import RolloutConfig
    from rollout.env_session import (
        ActOutcome,
        EnvSession,
        EnvSessionError,
        SampleRef,
        SessionFactory,
        SimEnvSession,
        TextEnvSession,
    )
    from rollout.errors import RolloutError
    from rollout.loop_host import GenerationTicket, LoopHost, SampleProgress
    from rollout.policies import builtin_policies, resolve_policy
    from rollout.recorder import RunRecorder
    from rollout.run_config import (
        AgentLoopConfig,
        ConductorConfig,
        PolicyConfig,
        RunConfig,
        SimulateConfig,
        TrainerSimConfig,
    )
    from rollout.run_summary import RunSummary
    from rollout.scheduler import RolloutScheduler
    from rollout.sessions import PooledEnv, PoolSessions, SimWorkloadSessions
    from rollout.simulation import load_simulation, simulate_policy
    from rollout.sink import TrajectorySink
    from rollout.tokenizer import ByteTokenizer, ChatPromptBuilder
    from rollout.trainer_sim import SimulatedTrainer
    from rollout.types import Group, Sample, Trajectory, Turn

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
    "resolve_policy",
    "simulate_policy",
]

_HOMES = {
    "ActOutcome": "rollout.env_session",
    "AdmissionController": "rollout.admission",
    "AgentLoop": "rollout.agent_loop",
    "AgentLoopConfig": "rollout.run_config",
    "Batch": "rollout.batch",
    "ByteTokenizer": "rollout.tokenizer",
    "ChatPromptBuilder": "rollout.tokenizer",
    "Conductor": "rollout.conductor",
    "ConductorConfig": "rollout.run_config",
    "ConductorStats": "rollout.conductor",
    "EnvSession": "rollout.env_session",
    "EnvSessionError": "rollout.env_session",
    "GenerationTicket": "rollout.loop_host",
    "Group": "rollout.types",
    "LoopHost": "rollout.loop_host",
    "PolicyConfig": "rollout.run_config",
    "PoolSessions": "rollout.sessions",
    "PooledEnv": "rollout.sessions",
    "RolloutConfig": "rollout.config",
    "RolloutError": "rollout.errors",
    "RolloutScheduler": "rollout.scheduler",
    "RunConfig": "rollout.run_config",
    "RunRecorder": "rollout.recorder",
    "RunSummary": "rollout.run_summary",
    "Sample": "rollout.types",
    "SampleProgress": "rollout.loop_host",
    "SampleRef": "rollout.env_session",
    "SessionFactory": "rollout.env_session",
    "SimEnvSession": "rollout.env_session",
    "SimWorkloadSessions": "rollout.sessions",
    "SimulateConfig": "rollout.run_config",
    "SimulatedTrainer": "rollout.trainer_sim",
    "TextEnvSession": "rollout.env_session",
    "TrainerSimConfig": "rollout.run_config",
    "Trajectory": "rollout.types",
    "TrajectorySink": "rollout.sink",
    "Turn": "rollout.types",
    "builtin_policies": "rollout.policies",
    "load_simulation": "rollout.simulation",
    "resolve_policy": "rollout.policies",
    "simulate_policy": "rollout.simulation",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rollout' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(__all__)
