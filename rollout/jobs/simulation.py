"""One simulated run: a policy's conductor, the simulated engines and envs, and the trainer.

A `Simulation` (the plan: `rollout.jobs.simulation_plan`) holds the settings resolved once;
`simulate_policy` runs one policy on the simulated world with the stand-in trainer for `steps`
training steps (the recipe of `rollout.jobs.assembly`), on whatever loop it is awaited on:
`rollout.simulation.vtime.run_virtual` for simulated time (the `conductor simulate` command), or
a test's loop. Every policy gets the same workload, engines, model, cluster and seed.
`simulated_conductor` gives the same conductor to a trainer loop of your own instead. A
cluster (`SimulateConfig.cluster`) runs several engines and an env fleet on the one virtual
clock; each engine is reported on its own (`PolicyRun.engines`) and the summary's busy
fraction is their mean.

A mixed run (`SimulateConfig.sources`) gives each task source its own workload, envs and
scripted token model; the engines play all of them (`RoutedTokenModel`), the conductor's
`SourcedSessions` sends each group to its source's envs. Its summary leaves out the script
figures (floor and length bias), which assume one workload.
"""

from __future__ import annotations

import functools
import gc
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from foundation.clock import LoopClock
from harness.events import EventBus
from harness.gc_pause import paused_gc
from rollout.core.predictors import LengthPredictor, build_predictor
from rollout.core.predictors.base import RemainingWork, SampleContext
from rollout.core.sources import SourceLayout
from rollout.engines.base import EngineStats
from rollout.engines.sim import SimEngine, SimEngineConfig, build_sim_engine
from rollout.jobs.assembly import RolloutSpec, StepHooks, World, open_conductor, run_steps
from rollout.jobs.run_health import RunHealth
from rollout.jobs.simulation_plan import PolicyPlan, Simulation
from rollout.observe.engine_work import EngineWork
from rollout.observe.health import percentile
from rollout.observe.prompt_sharing import without_shared_prompts
from rollout.observe.recorder import RunRecorder
from rollout.observe.run_summary import BatchDigest, FloorGap, RunSummary, summarize_run
from rollout.observe.stats import mean_or_none
from rollout.runtime.conductor import Conductor, ConductorStats
from rollout.runtime.env_session import SessionFactory, SourcedSessions
from rollout.runtime.policy import RolloutPolicy
from rollout.simulation.config import ClusterConfig
from rollout.simulation.engine_figures import EngineFigures, KVSampleLog, engine_figures
from rollout.simulation.env_fleet import FleetFigures, SimEnvFleet
from rollout.simulation.floor_gap import floor_gap
from rollout.simulation.lower_bound import engine_floor_s, script_tokens
from rollout.simulation.sessions import SimWorkloadSessions
from rollout.simulation.setup import SimStack, build_sim_stack, engine_names
from rollout.simulation.stall_guard import StallGuard
from rollout.simulation.workload import RoutedTokenModel, SyntheticWorkload
from rollout.trajectories.batch import Batch
from rollout.trajectories.sink import TrajectorySink

__all__ = [
    "CLUSTER_FILE",
    "PolicyRun",
    "simulate_policy",
    "simulated_conductor",
    "write_cluster_figures",
]

CLUSTER_FILE = "cluster.json"  # per-engine and env-fleet figures of a cluster run


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """The outcome of one policy: its summary, run directory (if any), engine KV backend, each
    engine's figures, the env fleet's (None without a fleet), and each engine's stats at the
    end (the simulator's own counters in `extra`: where its time went, for developer checks)."""

    summary: RunSummary
    run_dir: Path | None
    kv_backend: str
    engines: tuple[EngineFigures, ...] = ()
    fleet: FleetFigures | None = None
    engine_stats: tuple[EngineStats, ...] = ()


async def simulate_policy(
    simulation: Simulation,
    policy: RolloutPolicy,
    *,
    run_dir: Path | None = None,
    on_batch: Callable[[Batch], None] | None = None,
    metrics_port: int = 0,
) -> PolicyRun:
    """Run `policy` for `simulation.config.steps` training steps on the running loop.

    `metrics_port` > 0 serves the run's health metrics live on /metrics (Prometheus) while it
    runs; times and rates there are in virtual seconds. A taken port raises `RolloutError`
    before anything runs or is written.
    """
    plan = simulation.for_policy(policy)
    health = RunHealth(
        starvation_bound_s=plan.rollout.scheduler.starvation_bound_s,
        step_budget_s=simulation.config.conductor.deadline.step_budget_s,
        metrics_port=metrics_port,
    )
    try:
        return await _simulate_policy(simulation, plan, health, run_dir, on_batch)
    finally:
        health.close()


async def _simulate_policy(
    simulation: Simulation,
    plan: PolicyPlan,
    health: RunHealth,
    run_dir: Path | None,
    on_batch: Callable[[Batch], None] | None,
) -> PolicyRun:
    config = simulation.config
    clock, bus = LoopClock(), EventBus()
    stack = _stack(simulation, plan.engine, bus=bus, clock=clock)
    recorder = None
    if run_dir is not None:
        described = {**simulation.describe(), "policy": plan.policy.config.model_dump(mode="json")}
        effective = simulation.effective_config(plan)
        recorder = RunRecorder(run_dir, described, origin_s=clock.now(), effective_config=effective)
        recorder.attach(bus)
    collect_per_step = config.garbage_collection == "per_step"
    pause_collector = config.garbage_collection != "automatic"

    # The engines' counters when the trainer took the latest batch: the floor gap sets the
    # work done by the last batch against its floor (not what ran after it).
    at_last_batch: list[tuple[EngineStats, ...]] = []

    def after_batch(batch: Batch) -> None:
        at_last_batch[:] = [tuple(engine.stats() for engine in stack.engines)]
        if on_batch is not None:
            on_batch(batch)
        if collect_per_step:
            gc.collect()  # the step's cycles, at once (see `paused_gc`)

    # The sampling task runs whether or not anyone listens, so listening changes no timing.
    kv_samples = KVSampleLog()
    stall_guard = StallGuard(config.stall_after_s)

    def on_timeseries(record: Mapping[str, Any]) -> None:
        kv_samples.record(record)
        stall_guard.record(record)

    hooks = StepHooks(
        on_batch=after_batch,
        on_timeseries=on_timeseries,
        write_trajectories=config.write_trajectories,
    )
    try:
        with paused_gc(pause_collector):
            outcome = await run_steps(
                _spec(simulation, plan),
                _world(simulation, stack),
                steps=config.steps,
                trainer=config.trainer,
                health=health,
                bus=bus,
                clock=clock,
                recorder=recorder,
                hooks=hooks,
            )
    finally:
        await stack.aclose()
        if recorder is not None:
            recorder.close()
        if pause_collector:
            gc.collect()  # this run's cycles, before anything else runs
    return _policy_run(
        simulation,
        plan,
        stack,
        outcome.digests,
        outcome,
        run_dir,
        kv_samples,
        at_last_batch[0] if at_last_batch else (),
    )


def _policy_run(
    simulation: Simulation,
    plan: PolicyPlan,
    stack: SimStack | MixedSimStack,
    digests: Sequence[BatchDigest],
    outcome: Any,
    run_dir: Path | None,
    kv_samples: KVSampleLog,
    stats_at_last_batch: Sequence[EngineStats],
) -> PolicyRun:
    """The summary and figures of a finished policy run (`stats_at_last_batch`: each engine's
    stats when the trainer took the last batch)."""
    conductor: Conductor = outcome.conductor
    busy_s: Mapping[str, float] = outcome.busy_s or {}
    final_stats = tuple(engine.stats() for engine in stack.engines)  # read once, used below
    summary = summarize_run(
        plan.policy.name,
        digests,
        origin_s=conductor.origin_s,
        elapsed_s=outcome.elapsed_s,
        busy_s=sum(busy_s.values()),
        engines=len(stack.engines),  # busy fraction = the mean over engines
        counters=conductor.engine_counters,
        dispatch=conductor.stats.dispatch,
        host_hit_tokens=sum(int(stats.extra.get("host_hit_tokens", 0)) for stats in final_stats),
        decode_steps=_decode_steps(final_stats),
    )
    if isinstance(stack, SimStack):
        consumed = _consumed_work(digests)
        floor_s = _consumed_floor_s(simulation, stack, consumed)
        summary = with_script_figures(summary, stack, digests, conductor.stats, floor_s=floor_s)
        if digests:
            gap = _floor_gap(
                simulation, stack, consumed, floor_s, stats_at_last_batch, sum(summary.t_next_s)
            )
            summary = replace(summary, floor_gap=gap)
    engines = engine_figures(
        busy_s,
        capacity_tokens={
            engine.name: stats.kv_capacity_tokens
            for engine, stats in zip(stack.engines, final_stats, strict=True)
        },
        elapsed_s=outcome.elapsed_s,
        counters=conductor.engine_counters,
        kv=kv_samples,
    )
    fleet = stack.fleet.figures() if stack.fleet is not None else None
    if run_dir is not None and simulation.config.cluster != ClusterConfig():
        cost = {"model": simulation.model.name, **simulation.model.cost.model_dump(mode="json")}
        write_cluster_figures(run_dir / CLUSTER_FILE, engines, fleet, cost_model=cost)
    return PolicyRun(summary, run_dir, stack.kv_backend, engines, fleet, final_stats)


def write_cluster_figures(
    path: Path,
    engines: Sequence[EngineFigures],
    fleet: FleetFigures | None,
    *,
    cost_model: Mapping[str, Any],
) -> None:
    """Each engine's and the env fleet's figures as JSON, labelled SIMULATED with the cost
    model they rest on (cluster runs only: a default run's directory stays as it was)."""
    document = {
        "simulated": True,
        "cost_model": dict(cost_model),
        "engines": [asdict(figure) for figure in engines],
        "fleet": None if fleet is None else asdict(fleet),
    }
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _decode_steps(stats: Sequence[EngineStats]) -> tuple[int, int] | None:
    """The engines' decode tokens and decode steps, summed (None: one does not count them)."""
    tokens = steps = 0
    for engine in stats:
        extra = engine.extra
        if "decode_tokens" not in extra or "decode_steps" not in extra:
            return None
        tokens += int(extra["decode_tokens"])
        steps += int(extra["decode_steps"])
    return tokens, steps


def with_script_figures(
    summary: RunSummary,
    stack: SimStack,
    digests: Sequence[BatchDigest],
    stats: ConductorStats,
    *,
    floor_s: float,
) -> RunSummary:
    """`summary` with `floor_s`, the engine-time floor of the consumed samples (over all the
    stack's engines; `_consumed_floor_s`), per step, and their bias: the planned lengths (mean
    and p90) and rewards (scripts) of the consumed samples against those of every admitted
    group's (admitted groups take workload groups 0, 1, ... in the order they open)."""
    consumed_scripts = [
        script
        for digest in digests
        for group_id in digest.group_ids
        for script in stack.workload.group(stack.sessions.group_index(group_id))
    ]
    admitted_scripts = [
        script for index in range(stats.admitted_groups) for script in stack.workload.group(index)
    ]
    consumed = [script_tokens(script) for script in consumed_scripts]
    admitted = [script_tokens(script) for script in admitted_scripts]
    return replace(
        summary,
        floor_t_next_s=floor_s / len(digests) if digests else None,
        consumed_tokens_mean=mean_or_none(consumed),
        admitted_tokens_mean=mean_or_none(admitted),
        consumed_tokens_p90=percentile(consumed, 90.0) if consumed else None,
        admitted_tokens_p90=percentile(admitted, 90.0) if admitted else None,
        consumed_reward_mean=mean_or_none(script.reward for script in consumed_scripts),
        admitted_reward_mean=mean_or_none(script.reward for script in admitted_scripts),
    )


def _consumed_work(digests: Sequence[BatchDigest]) -> EngineWork:
    """The consumed samples' engine work, a prompt their groups share counted once."""
    return without_shared_prompts(
        sum((digest.work for digest in digests), EngineWork()),
        [use for digest in digests for use in digest.prompts],
    )


def _consumed_floor_s(simulation: Simulation, stack: SimStack, consumed: EngineWork) -> float:
    """The engine-time floor of the consumed samples' work over all the stack's engines."""
    engine = simulation.engine
    return engine_floor_s(
        consumed,
        simulation.model.cost,
        kv_pool_tokens=simulation.model.kv_capacity_tokens(engine.page_tokens),
        slots=engine.max_running_requests,
        engines=len(stack.engines),
        max_prefill_tokens=None if engine.mixed_chunk else engine.max_prefill_tokens,
    )


def _floor_gap(
    simulation: Simulation,
    stack: SimStack,
    consumed: EngineWork,
    floor_s: float,
    stats: Sequence[EngineStats],
    elapsed_s: float,
) -> FloorGap | None:
    """`elapsed_s` (Σ T_next) against `floor_s`, the floor of the `consumed` work, from the
    simulated engines' counters in `stats` (taken with the last batch; None: no batch was
    taken, or an engine that does not count its work)."""
    keys = (
        "decode_tokens",
        "decode_context_tokens",
        "prefill_tokens",
        "prefill_attention",
        "forward_fixed_s",
    )
    if not stats or not all(key in s.extra for s in stats for key in keys):
        return None

    def total(key: str) -> float:
        return sum(engine.extra[key] for engine in stats)

    done = EngineWork(
        decode_tokens=int(total("decode_tokens")),
        decode_context_tokens=int(total("decode_context_tokens")),
        prefill_tokens=int(total("prefill_tokens")),
        prefill_attention=total("prefill_attention"),
    )
    return floor_gap(
        elapsed_s=elapsed_s,
        floor_s=floor_s,
        consumed=consumed,
        done=done,
        done_fixed_s=total("forward_fixed_s"),
        cost=simulation.model.cost,
        engines=len(stack.engines),
    )


@asynccontextmanager
async def simulated_conductor(
    simulation: Simulation, policy: RolloutPolicy, *, sink: TrajectorySink | None = None
) -> AsyncIterator[Conductor]:
    """A running conductor on `simulation`'s engine and envs, for a trainer loop of your own.

    Consume `conductor.batches()` and publish weights with `conductor.update_weights` (see
    examples/batch_stream.py); leaving the block stops the conductor and closes the engine.
    Await it on `rollout.simulation.vtime.run_virtual` for simulated time.
    """
    plan = simulation.for_policy(policy)
    clock, bus = LoopClock(), EventBus()
    stack = _stack(simulation, plan.engine, bus=bus, clock=clock)
    world = _world(simulation, stack)
    try:
        async with open_conductor(
            _spec(simulation, plan), world, bus=bus, clock=clock, sink=sink
        ) as conductor:
            yield conductor
    finally:
        await stack.aclose()


@dataclass(frozen=True, slots=True)
class MixedSimStack:
    """A mixed run's engines and envs: each source's workload and sessions behind
    `SourcedSessions`; the engines play every source's token model."""

    engines: tuple[SimEngine, ...]
    workloads: Mapping[str, SyntheticWorkload]
    source_sessions: Mapping[str, SimWorkloadSessions]
    sessions: SessionFactory
    kv_backend: str
    fleet: SimEnvFleet | None = None

    async def aclose(self) -> None:
        for engine in self.engines:
            await engine.aclose()

    def truth(self, context: SampleContext) -> RemainingWork:
        """The oracle predictor's truth: asks the source whose env the sample has open."""
        for sessions in self.source_sessions.values():
            try:
                return sessions.truth(context)
            except KeyError:
                continue
        raise KeyError(f"sample {context.sample_id} has no open session")


def _mixed_stack(
    simulation: Simulation, engine_config: SimEngineConfig, *, bus: EventBus, clock: LoopClock
) -> MixedSimStack:
    """`build_sim_stack` for several sources (same engines, KV backend and fleet)."""
    seed = simulation.config.seed
    cluster = simulation.config.cluster
    workloads = {s.config.name: SyntheticWorkload(s.workload, seed) for s in simulation.sources}
    models = {name: workload.token_model() for name, workload in workloads.items()}
    routed = RoutedTokenModel(tuple(models.values()))
    engines = tuple(
        build_sim_engine(engine_config.model_copy(update={"name": name}), simulation.model, routed)
        for name in engine_names(engine_config.name, cluster.engines)
    )
    fleet = SimEnvFleet(cluster.env_nodes, cluster.node, clock) if cluster.env_nodes else None
    per_source = {
        name: SimWorkloadSessions(workloads[name], models[name], bus=bus, clock=clock, fleet=fleet)
        for name in workloads
    }
    layout = SourceLayout.of(simulation.source_prompts())
    sessions = SourcedSessions(layout, per_source)
    return MixedSimStack(
        engines, workloads, per_source, sessions, str(engine_config.kv_backend), fleet
    )


def _stack(
    simulation: Simulation, engine_config: SimEngineConfig, *, bus: EventBus, clock: LoopClock
) -> SimStack | MixedSimStack:
    """The engines (as the policy configured them) and envs of one policy's run."""
    if simulation.sources:
        return _mixed_stack(simulation, engine_config, bus=bus, clock=clock)
    return build_sim_stack(
        workload=simulation.workload,
        seed=simulation.config.seed,
        engine=engine_config,
        model=simulation.model,
        bus=bus,
        clock=clock,
        cluster=simulation.config.cluster,
    )


def _spec(simulation: Simulation, plan: PolicyPlan) -> RolloutSpec:
    conductor = simulation.config.conductor
    return RolloutSpec(plan.policy, plan.rollout, simulation.agent_loop, conductor)


def _world(simulation: Simulation, stack: SimStack | MixedSimStack) -> World:
    """The engines and envs of `stack`; the oracle predictor reads the stack's scripts."""
    predictor: LengthPredictor | None = None
    if simulation.rollout.predictor.kind == "oracle":
        truth = (
            stack.truth
            if isinstance(stack, MixedSimStack)
            else functools.partial(stack.sessions.truth, assign=True)
        )
        predictor = build_predictor(simulation.rollout.predictor, truth=truth)
    engines = stack.engines
    return World(
        engines=list(engines),
        sessions=stack.sessions,
        num_prompts=simulation.num_prompts,
        sources=simulation.source_prompts(),
        predictor=predictor,
        busy_s=lambda: {engine.name: engine.counters.busy_s for engine in engines},
    )
