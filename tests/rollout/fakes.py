"""Test doubles for the rollout shell: a recording loop host, failing engines and envs, and a
small simulated rollout (sim engine + synthetic workload, virtual time) with hooks."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from foundation.clock import Clock, LoopClock
from foundation.config import load_config
from harness.events import EventBus, EventRecorder
from rollout.core.config import RolloutConfig
from rollout.core.scheduler_events import SchedulerEvent
from rollout.core.types import SampleProgress
from rollout.engines.base import (
    Engine,
    EngineError,
    EngineStats,
    GenerateRequest,
    GenerateResult,
    KVHint,
)
from rollout.engines.registry import SimBackend
from rollout.engines.sim import ServedModelConfig, SimEngine, SimEngineConfig, build_sim_engine
from rollout.jobs.assembly import RolloutSpec, World, build_conductor
from rollout.jobs.plan import shape_run
from rollout.jobs.policies import resolve_policy
from rollout.runtime.conductor import Conductor
from rollout.runtime.config import AgentLoopConfig, ConductorConfig
from rollout.runtime.env_session import (
    ActOutcome,
    EnvSession,
    EnvSessionError,
    SampleRef,
    SessionFactory,
)
from rollout.runtime.loop_host import GenerationTicket
from rollout.runtime.policy import RolloutPolicy
from rollout.simulation.sessions import SimWorkloadSessions
from rollout.simulation.workload import SyntheticWorkload, WorkloadConfig
from rollout.standins.config import TrainerSimConfig
from rollout.standins.trainer import SimulatedTrainer
from rollout.trajectories.batch import Batch
from rollout.trajectories.sink import TrajectorySink
from tests.paths import CONFIGS

# A short workload: few turns, short outputs, quick tools (virtual seconds).
SHORT_WORKLOAD = (
    "turns.median=3",
    "turns.max=6",
    "output_tokens.median=60",
    "output_tokens.max=400",
    "observation_tokens.median=80",
    "observation_tokens.max=400",
)


def workload_config(group_size: int, overrides: Sequence[str] = SHORT_WORKLOAD) -> WorkloadConfig:
    return load_config(
        WorkloadConfig,
        CONFIGS / "workload" / "short_context.yaml",
        [*overrides, f"group_size={group_size}"],
    )


def model_config() -> ServedModelConfig:
    return load_config(ServedModelConfig, CONFIGS / "model" / "qwen3_8b_h200.yaml")


def engine_config(overrides: Sequence[str] = ()) -> SimEngineConfig:
    return load_config(SimEngineConfig, CONFIGS / "engine" / "sim.yaml", overrides)


def loop_config(workload: WorkloadConfig, **changes: Any) -> AgentLoopConfig:
    return AgentLoopConfig(
        max_new_tokens=workload.max_new_tokens,
        max_context_tokens=workload.max_context_tokens,
        **changes,
    )


# -- a loop host that records everything ------------------------------------------------------


@dataclass
class RecordingHost:
    """A `LoopHost` that grants every generation at once and records what the loop did."""

    engines: Mapping[str, Engine]
    critical: bool = False
    kv_hints: bool = True
    clock: Clock = field(default_factory=LoopClock)
    bus: EventBus = field(default_factory=EventBus)
    events: list[SchedulerEvent] = field(default_factory=list)
    tickets: list[GenerationTicket] = field(default_factory=list)
    requests: list[GenerateRequest] = field(default_factory=list)
    results: list[GenerateResult] = field(default_factory=list)
    progress: list[SampleProgress] = field(default_factory=list)
    tool_waits: list[tuple[str, str, str | None, float]] = field(default_factory=list)
    ticket_given: asyncio.Event = field(default_factory=asyncio.Event)
    _rids: Iterator[int] = field(default_factory=itertools.count)

    async def next_generation(self, sample_id: str) -> GenerationTicket:
        engine = next(iter(self.engines))
        rid = f"{sample_id}/{next(self._rids):032x}"
        ticket = GenerationTicket(sample_id, engine, rid, high=self.critical)
        self.tickets.append(ticket)
        self.ticket_given.set()
        return ticket

    def report(self, event: SchedulerEvent) -> None:
        self.events.append(event)

    def engine(self, name: str) -> Engine:
        return self.engines[name]

    def is_critical(self, group_id: str) -> bool:
        return self.critical

    def generation_done(
        self,
        engine: str,
        request: GenerateRequest,
        result: GenerateResult,
        *,
        computed_prefix_tokens: int,
        sample_id: str = "",
        prefix_from_older_weights: bool = False,
    ) -> None:
        self.requests.append(request)
        self.results.append(result)

    def turn_boundary(self, progress: SampleProgress) -> None:
        self.progress.append(progress)

    def expected_tool_s(self, tool: str | None) -> float:
        return 1.0

    def tool_observed(self, tool: str | None, seconds: float) -> None:
        pass

    def tool_wait_hinted(
        self, sample_id: str, engine: str, *, high: bool, tool: str | None, expected_s: float
    ) -> None:
        self.tool_waits.append((sample_id, engine, tool, expected_s))


# -- engines and envs that fail on purpose ----------------------------------------------------


class FlakyEngine:
    """Delegates to `inner`, but its `generate` calls number `fail_calls` raise `EngineError`.

    Records every request and every out-of-band hint.
    """

    def __init__(self, inner: Engine, fail_calls: Iterable[int] = ()) -> None:
        self.inner = inner
        self.name = inner.name
        self.fail_calls = set(fail_calls)
        self.calls = 0
        self.requests: list[GenerateRequest] = []
        self.hints: list[KVHint] = []

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        self.calls += 1
        self.requests.append(request)
        if self.calls in self.fail_calls:
            raise EngineError(f"injected failure of generate call {self.calls}")
        return await self.inner.generate(request)

    async def abort(self, rid: str) -> None:
        await self.inner.abort(rid)

    async def send_kv_hints(self, hints: Sequence[KVHint]) -> None:
        self.hints.extend(hints)
        await self.inner.send_kv_hints(hints)

    async def pause(self) -> None:
        await self.inner.pause()

    async def resume(self) -> None:
        await self.inner.resume()

    async def update_weights(self, version: int, *, flush_cache: bool = True) -> None:
        await self.inner.update_weights(version, flush_cache=flush_cache)

    def stats(self) -> EngineStats:
        return self.inner.stats()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _FailingSession:
    """Wraps a session; its `act` number `fail_at_act` (1-based) returns an infra error."""

    def __init__(self, inner: EnvSession, fail_at_act: int) -> None:
        self._inner = inner
        self._fail_at_act = fail_at_act
        self._acts = 0

    @property
    def session_id(self) -> str:
        return self._inner.session_id

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return self._inner.stop_token_ids

    async def start(self) -> tuple[int, ...]:
        return await self._inner.start()

    def peek_tool(self, generated_ids: Sequence[int]) -> str | None:
        return self._inner.peek_tool(generated_ids)

    async def act(self, generated_ids: Sequence[int], *, high: bool) -> ActOutcome:
        self._acts += 1
        if self._acts == self._fail_at_act:
            return ActOutcome(done=True, truncated=True, infra_error="sandbox_dead: injected")
        return await self._inner.act(generated_ids, high=high)

    def set_priority(self, high: bool) -> None:
        self._inner.set_priority(high)

    async def close(self) -> None:
        await self._inner.close()


@dataclass
class FlakySessions:
    """Wraps a session factory and injects infrastructure failures per (sample id, retry).

    `fail_start`: attempts whose env cannot start; `fail_act`: attempts whose n-th action hits a
    dead sandbox. `opened` counts sessions open at once (to check agent-slot limits).
    """

    inner: SessionFactory
    fail_start: set[tuple[str, int]] = field(default_factory=set)
    fail_act: dict[tuple[str, int], int] = field(default_factory=dict)
    opened: int = 0
    live: int = 0
    max_live: int = 0

    async def open(self, sample: SampleRef) -> EnvSession:
        key = (sample.sample_id, sample.retry)
        if key in self.fail_start:
            raise EnvSessionError(f"injected: no sandbox for {key}")
        session = await self.inner.open(sample)
        self.opened += 1
        self.live += 1
        self.max_live = max(self.max_live, self.live)
        if key in self.fail_act:
            session = _FailingSession(session, self.fail_act[key])
        return _Counted(session, self)

    def prewarm(self, prompt_indices: Sequence[int]) -> None:
        self.inner.prewarm(prompt_indices)


class _Counted(_FailingSession):
    def __init__(self, inner: EnvSession, owner: FlakySessions) -> None:
        super().__init__(inner, fail_at_act=-1)
        self._owner = owner

    async def close(self) -> None:
        self._owner.live -= 1
        await super().close()


# -- a small simulated rollout ----------------------------------------------------------------


@dataclass
class SimRollout:
    """The pieces of a simulated run, built inside the running (virtual-time) loop."""

    conductor: Conductor
    engine: FlakyEngine
    sim_engine: SimEngine
    sessions: FlakySessions
    recorder: EventRecorder
    timeseries: list[Mapping[str, Any]]


def build_rollout(
    *,
    policy: str | RolloutPolicy = "conductor",
    seed: int = 0,
    groups_per_step: int = 2,
    group_size: int = 3,
    async_factor: int = 2,
    engine_overrides: Sequence[str] = ("max_running_requests=4",),
    workload_overrides: Sequence[str] = SHORT_WORKLOAD,
    fail_generate: Iterable[int] = (),
    loop_changes: Mapping[str, Any] | None = None,
    conductor_config: ConductorConfig | None = None,
    rollout_overrides: Sequence[str] = (),
    sink: TrajectorySink | None = None,
) -> SimRollout:
    """A conductor over the sim engine and synthetic envs; call inside the running loop."""
    chosen = resolve_policy(policy) if isinstance(policy, str) else policy
    workload = workload_config(group_size, workload_overrides)
    synthetic = SyntheticWorkload(workload, seed)
    token_model = synthetic.token_model()
    engine_settings, _ = SimBackend().configure(
        engine_config(engine_overrides), chosen.engine_asks()
    )
    assert isinstance(engine_settings, SimEngineConfig)
    sim_engine = build_sim_engine(engine_settings, model_config(), token_model)
    engine = FlakyEngine(sim_engine, fail_generate)
    bus, clock = EventBus(), LoopClock()
    recorder = EventRecorder()
    bus.subscribe(recorder)
    sessions = FlakySessions(SimWorkloadSessions(synthetic, token_model, bus=bus, clock=clock))
    rollout = shape_run(
        load_config(RolloutConfig, CONFIGS / "rollout" / "default.yaml", rollout_overrides),
        groups_per_step=groups_per_step,
        group_size=group_size,
        async_factor=async_factor,
        seed=seed,
    )
    timeseries: list[Mapping[str, Any]] = []
    spec = RolloutSpec(
        chosen,
        chosen.shape_rollout(rollout),
        loop_config(workload, **dict(loop_changes or {})),
        conductor_config or ConductorConfig(timeseries_interval_s=1.0, seed=seed),
    )
    world = World(engines=[engine], sessions=sessions, num_prompts=workload.num_groups)
    conductor = build_conductor(
        spec, world, sink=sink, bus=bus, clock=clock, on_timeseries=timeseries.append
    )
    return SimRollout(conductor, engine, sim_engine, sessions, recorder, timeseries)


async def train(
    rollout: SimRollout,
    steps: int,
    *,
    train_time_s: float = 5.0,
    on_batch: Callable[[Batch], None] | None = None,
) -> list[Batch]:
    """Run the simulated trainer for `steps` steps inside the conductor's lifetime; returns
    the batches it consumed (whole: tests inspect their trajectories)."""
    batches: list[Batch] = []

    def keep(batch: Batch) -> None:
        batches.append(batch)
        if on_batch is not None:
            on_batch(batch)

    trainer = SimulatedTrainer(TrainerSimConfig(train_time_s=train_time_s), on_batch=keep)
    digests = await trainer.run(rollout.conductor, steps)
    assert [digest.complete_s for digest in digests] == [batch.complete_s for batch in batches]
    return batches
