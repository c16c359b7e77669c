"""Builds the simulated side of a run for one policy: the engines, their KV backends, the envs.

The workload, model, cluster shape and seed are the same for every policy; the engine config
comes in already shaped by the policy (its KV backend and queue order: the plan applies the
policy's engine asks once, `rollout.engines.registry.SimBackend.configure`), so comparisons are
honest. A cluster (`ClusterConfig`) has several engines, each with its own slots and KV pool,
and optionally an env fleet whose nodes queue container starts and tool calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from foundation.clock import Clock
from harness.events import EventBus
from rollout.engines.sim import ServedModelConfig, SimEngine, SimEngineConfig, build_sim_engine
from rollout.simulation.config import ClusterConfig
from rollout.simulation.env_fleet import SimEnvFleet
from rollout.simulation.sessions import SimWorkloadSessions
from rollout.simulation.workload import SyntheticWorkload, WorkloadConfig

__all__ = ["SimStack", "build_sim_stack", "engine_names"]


@dataclass(frozen=True, slots=True)
class SimStack:
    """One policy's simulated engines and envs; `kv_backend` names the engines' KV backend."""

    engines: tuple[SimEngine, ...]
    workload: SyntheticWorkload
    sessions: SimWorkloadSessions
    kv_backend: str
    fleet: SimEnvFleet | None = field(default=None)

    @property
    def engine(self) -> SimEngine:
        """The first engine (the only one unless the cluster has several)."""
        return self.engines[0]

    async def aclose(self) -> None:
        """Close every engine."""
        for engine in self.engines:
            await engine.aclose()


def engine_names(base: str, count: int) -> tuple[str, ...]:
    """Unique engine names: `base` alone for one engine (as before clusters), else `base-i`."""
    if count < 1:
        raise ValueError(f"a cluster needs at least one engine, got {count}")
    return (base,) if count == 1 else tuple(f"{base}-{index}" for index in range(count))


def build_sim_stack(
    *,
    workload: WorkloadConfig,
    seed: int,
    engine: SimEngineConfig,
    model: ServedModelConfig,
    bus: EventBus,
    clock: Clock,
    cluster: ClusterConfig | None = None,
) -> SimStack:
    """The engines (`engine`: as the policy shaped it) and the workload's envs.

    `cluster` (default: one engine, no env fleet) sets how many engines and env nodes. The
    engines share the workload's token model: it keys its state by session, and a sample's
    session stays on one engine.
    """
    cluster = cluster or ClusterConfig()
    engine_config = engine
    synthetic = SyntheticWorkload(workload, seed)
    token_model = synthetic.token_model()
    engines = tuple(
        build_sim_engine(engine_config.model_copy(update={"name": name}), model, token_model)
        for name in engine_names(engine_config.name, cluster.engines)
    )
    fleet = None
    if cluster.env_nodes > 0:
        fleet = SimEnvFleet(cluster.env_nodes, cluster.node, clock)
    sessions = SimWorkloadSessions(synthetic, token_model, bus=bus, clock=clock, fleet=fleet)
    return SimStack(engines, synthetic, sessions, str(engine_config.kv_backend), fleet)
