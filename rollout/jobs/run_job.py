"""The job of `conductor run`: a plan's rollout in real sandboxes, on its engine backend.

The plan (`rollout.jobs.run_plan`) has resolved and checked every setting; this module builds the
world the rollout runs against and hands it to the one assembly (`rollout.jobs.assembly`):

1. the sandboxes (Docker when a daemon answers, else the local sandbox) and the images of the
   prompts the run can reach (`reachable_prompts`);
2. the engines, from the backend (the scripted agent plays the model inside a simulated one);
3. the env pool (one daemon, several `pool.hosts`, or Ray env workers), and each source's env
   sessions behind one `SourcedSessions` (a bring-your-own agent plays them through the capture
   endpoint when `agent_api.agent` is set);
4. `run_steps`: the conductor and the stand-in trainer, a checkpoint after every step, then the
   summary. A resumed run restores the conductor from its checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.swe.actions import openai_tool_schemas
from envs.swe.factory import SandboxSpec, sandboxes_for
from envs.swe.images import TaskImageConfig, numeric_uid
from envs.swe.runtime import BackendSandboxes
from foundation.clock import LoopClock
from harness.events import EventBus
from harness.fleet import LeasePool
from harness.fleet.build import build_pool
from harness.loop_watchdog import LoopWatchdog
from rollout.agent_api.server import AgentApiServer
from rollout.agent_api.sessions import CaptureSessions
from rollout.core.admission import AdmissionController
from rollout.core.sources import SourceLayout
from rollout.engines.base import Engine
from rollout.engines.faults import FaultyEngine
from rollout.engines.registry import EngineBuildContext
from rollout.engines.sim import SimEngine
from rollout.errors import RolloutError, RunFileWriteError
from rollout.jobs.assembly import RolloutSpec, StepHooks, World, run_steps
from rollout.jobs.checkpoint import Checkpoint, write_checkpoint
from rollout.jobs.env_sources import LoadedSource
from rollout.jobs.run_health import RunHealth
from rollout.jobs.run_plan import RunPlan
from rollout.jobs.summary import summarize_conductor_run
from rollout.observe.recorder import RunRecorder
from rollout.observe.run_summary import RunSummary
from rollout.runtime.conductor import Conductor
from rollout.runtime.env_session import SampleRef, SessionFactory, SourcedSessions
from rollout.runtime.pool_sessions import PooledEnv, PoolSessions
from rollout.standins.scripted_agent import ScriptedSWEAgent
from rollout.trajectories.batch import Batch, BatchOutline

__all__ = ["RunResult", "reachable_prompts", "run_job"]


@dataclass(frozen=True, slots=True)
class RunResult:
    """What `conductor run` prints: each step's outline (and its whole batch, when kept), their
    summary and where the run was written."""

    batches: tuple[Batch, ...]  # every step's, or () when the run was told not to keep them
    summary: RunSummary
    run_dir: Path
    backend: str
    elapsed_s: float
    steps: tuple[BatchOutline, ...] = ()


def reachable_prompts(admission: AdmissionController, reach: int) -> set[int]:
    """The prompt indices the next `reach` groups can take. Each epoch of the admission order
    is a permutation of every prompt, so 2 × (prompts) positions from any cursor hold a whole
    epoch: past that, every prompt is reachable (and `steps=10**9` costs nothing up front)."""
    every = admission.num_prompts
    if reach >= 2 * every:
        return set(range(every))
    return set(admission.peek_prompt_indices(reach))


async def run_job(
    plan: RunPlan,
    run_dir: Path,
    *,
    on_batch: Callable[[Batch], None] | None = None,
    on_backend: Callable[[str], None] | None = None,
    resume_from: Checkpoint | None = None,
    metrics_port: int = 0,
    keep_batches: bool = True,
) -> RunResult:
    """Run the plan's remaining training steps, writing `run_dir` (a checkpoint after each).

    With `resume_from` (the run directory already cut back by `prepare_resume`) the run
    continues from that step. `metrics_port` > 0 serves the scheduler's health metrics live on
    /metrics (Prometheus). `keep_batches=False` keeps only each step's outline (a long run's
    memory stays flat).
    """
    spec = _sandbox_spec(plan)
    runtime = spec.build()
    sandboxes_for(spec, existing=runtime)  # env factories off the pool grade on it
    try:
        if on_backend is not None:
            on_backend(runtime.backend.name)
        images = await _prepare_images(plan, runtime)
        return await _run_with_images(
            plan, run_dir, spec, runtime, images, on_batch, resume_from, metrics_port,
            keep_batches,
        )  # fmt: skip
    finally:
        runtime.close()


def _sandbox_spec(plan: RunPlan) -> SandboxSpec:
    pool = plan.pool
    return SandboxSpec(
        pool.backend,
        TaskImageConfig(agent_uid=numeric_uid(pool.container.user, pool.container.auto_uid)),
        pool.workdir,
        pool.container,
        pool.exec,
    )


def _admission(plan: RunPlan) -> AdmissionController:
    """The admission order the conductor will follow (to find the reachable prompts)."""
    layout = plan.layout
    sources = layout.sources if plan.mixed else ()
    return AdmissionController(plan.rollout.admission, layout.num_prompts, sources)


async def _prepare_images(plan: RunPlan, runtime: BackendSandboxes) -> dict[str, dict[int, str]]:
    """Each source's image per local prompt index, for every prompt the run can reach: at
    most (steps + async_factor) × B groups are admitted, and the pool looks one batch ahead."""
    config = plan.config
    reach = (config.steps + config.async_factor + 1) * config.groups_per_step
    layout = plan.layout
    by_name = {source.name: source for source in plan.sources}
    images: dict[str, dict[int, str]] = {source.name: {} for source in plan.sources}
    for index in sorted(reachable_prompts(_admission(plan), reach)):
        name, local = layout.locate(index)
        images[name][local] = await by_name[name].prepare_image(local, runtime)
    return images


async def _run_with_images(
    plan: RunPlan,
    run_dir: Path,
    spec: SandboxSpec,
    runtime: BackendSandboxes,
    images: Mapping[str, Mapping[int, str]],
    on_batch: Callable[[Batch], None] | None,
    resume_from: Checkpoint | None,
    metrics_port: int,
    keep_batches: bool,
) -> RunResult:
    clock, bus = LoopClock(), EventBus()
    resumed_at_s = 0.0 if resume_from is None else resume_from.last_step_t_s
    main_task = asyncio.current_task()
    assert main_task is not None

    def stop_on_write_failure(_: RunFileWriteError) -> None:
        main_task.cancel()  # stop cleanly; the error is raised below

    recorder = RunRecorder(
        run_dir,
        {**plan.describe(), "backend": runtime.backend.name},
        origin_s=clock.now() - resumed_at_s,
        on_write_failure=stop_on_write_failure,
        effective_config=plan.effective_config(),
    )
    recorder.attach(bus)
    watchdog = LoopWatchdog(plan.config.watchdog, bus, clock).start()  # stalls into events.jsonl
    health = RunHealth(
        starvation_bound_s=plan.rollout.scheduler.starvation_bound_s,
        step_budget_s=plan.config.conductor.deadline.step_budget_s,
        metrics_port=metrics_port,
    )
    try:
        return await _rollout(
            plan, run_dir, spec, runtime, images, recorder, health, clock, bus, on_batch,
            resume_from, keep_batches,
        )  # fmt: skip
    except asyncio.CancelledError:
        if recorder.write_failure is None:
            raise
        main_task.uncancel()  # the cancel was ours: the run stops with the disk error
        raise recorder.write_failure from None
    finally:
        watchdog.stop()
        health.close()
        recorder.close()


async def _rollout(
    plan: RunPlan,
    run_dir: Path,
    spec: SandboxSpec,
    runtime: BackendSandboxes,
    images: Mapping[str, Mapping[int, str]],
    recorder: RunRecorder,
    health: RunHealth,
    clock: LoopClock,
    bus: EventBus,
    on_batch: Callable[[Batch], None] | None,
    resume_from: Checkpoint | None,
    keep_batches: bool,
) -> RunResult:
    """Steps 2-4 of the module docstring."""
    config = plan.config
    # The scripted agent plays the model inside a simulated engine (a server's model plays it
    # elsewhere: nothing to script).
    agent = (
        ScriptedSWEAgent(plan.tokenizer, config.scripted)
        if plan.backend.needs_token_model
        else None
    )
    batches: list[Batch] = []  # whole, for the caller (unless keep_batches is False)
    outlines: list[BatchOutline] = []

    def record(batch: Batch) -> None:
        if keep_batches:
            batches.append(batch)
        outlines.append(batch.outline())
        if on_batch is not None:
            on_batch(batch)

    def checkpoint(batch: Batch, conductor: Conductor) -> None:
        state = Checkpoint(
            steps_done=conductor.stats.batches,
            conductor_state=conductor.state_dict(),
            base_dir=str(plan.base_dir),
            last_step_t_s=batch.complete_s - recorder.origin_s,
        )
        write_checkpoint(run_dir, state)

    every_image = sorted({image for per in images.values() for image in per.values()})
    async with (
        _engines(plan, agent) as engines,
        build_pool(
            plan.pool, runtime.backend, bus=bus, clock=clock, images=every_image, ray=plan.ray
        ) as pool,
        _agent_server(plan) as server,
    ):
        layout = plan.layout
        world = World(
            engines=engines,
            sessions=_sessions(plan, layout, pool, spec, images, agent, server),
            num_prompts=layout.num_prompts,
            sources=layout.sources if plan.mixed else (),
            busy_s=lambda: _busy_s(engines),
            pool=pool,
        )
        outcome = await run_steps(
            RolloutSpec(plan.policy, plan.rollout, config.agent_loop, config.conductor),
            world,
            steps=config.steps - (0 if resume_from is None else resume_from.steps_done),
            trainer=config.trainer,
            health=health,
            bus=bus,
            clock=clock,
            recorder=recorder,
            hooks=StepHooks(
                on_batch=record,
                on_trained=checkpoint,
                restore=None if resume_from is None else resume_from.conductor_state,
                # A resumed run restores scheduler state replay cannot rebuild: not logged.
                decisions=resume_from is None,
            ),
        )
    summary = summarize_conductor_run(
        plan.policy.name,
        outcome.digests,
        outcome.conductor,
        elapsed_s=outcome.elapsed_s,
        busy_s=None if outcome.busy_s is None else sum(outcome.busy_s.values()),
    )
    return RunResult(
        tuple(batches), summary, run_dir, runtime.backend.name, outcome.elapsed_s, tuple(outlines)
    )


@contextlib.asynccontextmanager
async def _engines(plan: RunPlan, agent: ScriptedSWEAgent | None) -> AsyncIterator[list[Engine]]:
    """The backend's started engines (fault-injected when configured), closed on exit."""
    context = EngineBuildContext(
        base_dir=plan.base_dir,
        model=plan.model,
        token_model=agent,
        encode=plan.tokenizer.encode,
    )
    engines = await plan.backend.connect(plan.engine, context)
    try:
        faults = plan.config.engine_faults
        if faults.enabled:
            engines = [FaultyEngine(engine, faults) for engine in engines]
        yield engines
    finally:
        for engine in engines:
            await engine.aclose()


def _sessions(
    plan: RunPlan,
    layout: SourceLayout,
    pool: LeasePool,
    spec: SandboxSpec,
    images: Mapping[str, Mapping[int, str]],
    agent: ScriptedSWEAgent | None,
    server: AgentApiServer | None,
) -> SessionFactory:
    """Each source's env sessions behind one `SourcedSessions` (a run of one source too)."""
    loop = plan.config.agent_loop
    factories: dict[str, SessionFactory] = {}
    for source in plan.sources:
        env_for = _env_for(source, images[source.name], spec)

        def on_open(session_id: str, sample: SampleRef, source: LoadedSource = source) -> None:
            if agent is None:
                return
            index, key = sample.group.prompt_index, sample.sample_id
            turns = source.scripted_turns(index, agent.sample_rng(key), plan.config.scripted)
            if turns is not None:  # (a served model reads its task from the prompt)
                agent.register_script(session_id, turns, key)

        options: dict[str, Any] = {
            "system_prompt": source.system_prompt,
            "template": source.template,
            "priorities": (loop.high_priority, loop.low_priority),
            "tool_of": source.tool_of,
            "tool_result_chars": loop.tool_result_chars,
            "on_open": on_open,
            "chat_format": source.chat_format,
        }
        if server is None or plan.agent is None:
            factories[source.name] = PoolSessions(pool, env_for, plan.tokenizer, **options)
        else:  # a bring-your-own agent plays each sample through the chat API
            factories[source.name] = CaptureSessions(
                pool,
                env_for,
                plan.tokenizer,
                agent=plan.agent,
                server=server,
                tools=openai_tool_schemas(source.tools),
                call_timeout_s=plan.config.agent_api.call_timeout_s,
                **options,
            )
    return SourcedSessions(layout, factories)


def _env_for(
    source: LoadedSource, images: Mapping[int, str], spec: SandboxSpec
) -> Callable[[int], PooledEnv]:
    def env_for(index: int) -> PooledEnv:
        image = images.get(index)
        if image is None:
            raise RolloutError(f"no image was prepared for prompt {index} of {source.name!r}")
        return source.make_env(index, image, spec)

    return env_for


def _busy_s(engines: Sequence[Engine]) -> dict[str, float] | None:
    """Each engine's busy time: the simulated engine's own, an SGLang server's from its
    /metrics (None when an engine reports none: a server without --enable-metrics)."""
    served = [engine.inner if isinstance(engine, FaultyEngine) else engine for engine in engines]
    busy: dict[str, float] = {}
    for engine in served:
        if isinstance(engine, SimEngine):
            busy[engine.name] = engine.counters.busy_s
            continue
        reported = engine.stats().extra.get("busy_s")
        if reported is None:
            return None
        busy[engine.name] = float(reported)
    return busy


@contextlib.asynccontextmanager
async def _agent_server(plan: RunPlan) -> AsyncIterator[AgentApiServer | None]:
    """The capture endpoint when the run has a bring-your-own agent, else None."""
    config = plan.config.agent_api
    if not config.agent:
        yield None
        return
    async with AgentApiServer(
        config.model, config.host, config.port, max_body_mb=config.max_body_mb
    ) as server:
        yield server
