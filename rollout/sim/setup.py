"""Builds the simulated side of a run for one policy: the engine, its KV backend, the envs.

The workload, engine config, model and seed are the same for every policy; only the policy's
flags choose the engine's KV backend (`kv_policy`: the LRU radix cache or the priority-aware
`kvcache/` manager) and its queue order (`engine_config_for`), so comparisons are honest.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.clock import Clock
from harness.events import EventBus
from rollout.engines.sim import ServedModelConfig, SimEngine, SimEngineConfig, build_sim_engine
from rollout.engines.sim.config import KVBackendKind, SchedulePolicy
from rollout.runtime.config import PolicyConfig
from rollout.sim.sessions import SimWorkloadSessions
from rollout.sim.workload import SyntheticWorkload, WorkloadConfig

__all__ = ["SimStack", "build_sim_stack", "engine_config_for"]


@dataclass(frozen=True, slots=True)
class SimStack:
    """One policy's simulated engine and envs; `kv_backend` names the engine's KV backend."""

    engine: SimEngine
    workload: SyntheticWorkload
    sessions: SimWorkloadSessions
    kv_backend: str


def build_sim_stack(
    policy: PolicyConfig,
    *,
    workload: WorkloadConfig,
    seed: int,
    engine: SimEngineConfig,
    model: ServedModelConfig,
    bus: EventBus,
    clock: Clock,
) -> SimStack:
    """The engine (with the policy's KV backend and queue order) and the workload's envs."""
    engine_config = engine_config_for(policy, engine)
    synthetic = SyntheticWorkload(workload, seed)
    token_model = synthetic.token_model()
    sim_engine = build_sim_engine(engine_config, model, token_model)
    sessions = SimWorkloadSessions(synthetic, token_model, bus=bus, clock=clock)
    return SimStack(sim_engine, synthetic, sessions, str(engine_config.kv_backend))


def engine_config_for(policy: PolicyConfig, engine: SimEngineConfig) -> SimEngineConfig:
    """`engine` with the policy's KV backend and queue order (validated again)."""
    schedule = SchedulePolicy.PRIORITY if policy.engine_priority_scheduling else SchedulePolicy.FCFS
    changes: dict[str, object] = {
        "kv_backend": KVBackendKind(policy.kv_policy),
        "schedule_policy": schedule,
    }
    if not policy.engine_priority_scheduling:
        changes["priority_preemption"] = False
    return SimEngineConfig.model_validate({**engine.model_dump(), **changes})
