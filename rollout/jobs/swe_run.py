"""The SWE rollout of `conductor run`: real sandboxes, the simulated engine or SGLang servers.

The shipped SWE tasks run in the env pool (Docker when a daemon answers, else the local
sandbox), their tool calls and grading are real, the conductor schedules as in production, and
the simulated trainer consumes batches and publishes weights. The model is either
`ScriptedSWEAgent` inside the in-process simulated engine, which paces itself on its cost model
in wall-clock time (`engine_backend: sim`), or whatever SGLang servers serve, reached through
`SGLangEngine` over HTTP (`engine_backend: sglang`; `conductor serve-sim` serves the same
scripted agents there).

With `sources` (a mixed run) each group comes from one task source, with its own env, system
prompt, chat template and tool format; `rollout.jobs.run_sources` builds them and this job
wires them in as `conductor simulate` does (`SourcedSessions` and the admission's source mix).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.swe import SWEEnvConfig, SWETask, load_shipped_tasks
from envs.swe.actions import ParsedAction, openai_tool_schemas, parse_action, swe_tool_specs
from envs.swe.datasets import DatasetConfig, load_dataset_tasks
from envs.swe.factory import SandboxSpec, SWEEnvFactory, sandboxes_for
from envs.swe.images import TaskImageConfig, numeric_uid
from envs.swe.tasks import TaskSetError
from harness.clock import LoopClock
from harness.config import ConfigError
from harness.events import EventBus
from harness.fleet.build import build_pool
from harness.fleet.ray_config import RayPoolConfig
from harness.loop_watchdog import LoopWatchdog
from harness.pool import PoolConfig
from rollout.agent_api.config import AgentApiConfig
from rollout.agent_api.loading import load_agent
from rollout.agent_api.server import AgentApiServer
from rollout.agent_api.sessions import CaptureSessions
from rollout.core.admission import AdmissionController
from rollout.core.config import RolloutConfig
from rollout.core.sources import SourceLayout
from rollout.engines.base import Engine
from rollout.engines.faults import FaultyEngine
from rollout.engines.sglang import SGLangEngineConfig, connect_sglang_engines
from rollout.engines.sim import ServedModelConfig, SimEngine, SimEngineConfig, build_sim_engine
from rollout.errors import RolloutError, RunFileWriteError
from rollout.jobs.checkpoint import Checkpoint, write_checkpoint
from rollout.jobs.config import RunConfig, shape_rollout
from rollout.jobs.policies import resolve_policy
from rollout.jobs.run_health import RunHealth
from rollout.jobs.run_sources import RunSource, load_run_sources, source_images, sourced_sessions
from rollout.jobs.summary import summarize_conductor_run
from rollout.observe.recorder import RunRecorder
from rollout.observe.run_summary import RunSummary
from rollout.runtime.conductor import Conductor
from rollout.runtime.env_session import SampleRef, SessionFactory
from rollout.runtime.pool_sessions import PooledEnv, PoolSessions
from rollout.sim.scripted_agent import ScriptedSWEAgent
from rollout.sim.setup import engine_config_for
from rollout.sim.trainer import SimulatedTrainer
from rollout.trajectories.batch import Batch, BatchOutline
from rollout.trajectories.chat_format import ChatFormat
from rollout.trajectories.hf_tokenizer import HFChatFormat, HFTokenizer
from rollout.trajectories.sink import TrajectorySink
from rollout.trajectories.tokenizer import ByteTokenizer, Tokenizer

__all__ = ["SWERunResult", "reachable_prompts", "run_swe_rollout", "select_tasks"]


@dataclass(frozen=True, slots=True)
class SWERunResult:
    """What `conductor run` prints: the steps (and their batches, when kept), their summary
    and where the run was written."""

    batches: tuple[Batch, ...]  # every step's, or () when the run was told not to keep them
    summary: RunSummary
    run_dir: Path
    backend: str
    elapsed_s: float
    steps: tuple[BatchOutline, ...] = ()


def select_tasks(
    task_ids: Sequence[str],
    tasks_file: Path | None = None,
    dataset: DatasetConfig | None = None,
) -> list[SWETask]:
    """The tasks named by `task_ids` (all of them when empty), in the given order, from
    `tasks_file` (read as `dataset` says) or the shipped set. Bad records are a ConfigError."""
    if tasks_file is None:
        tasks = list(load_shipped_tasks())
        listing = (
            "`python -c 'from envs.swe import load_shipped_tasks as l; print([t.instance_id for "
            "t in l()])'`"
        )
    else:
        try:
            loaded = load_dataset_tasks(tasks_file, dataset or DatasetConfig())
        except TaskSetError as exc:
            raise ConfigError(str(exc)) from exc
        if loaded.errors:
            listing = "\n  ".join(str(error) for error in loaded.errors)
            raise ConfigError(
                f"{len(loaded.errors)} bad task record(s) in {tasks_file}; fix or remove them:"
                f"\n  {listing}"
            )
        tasks = list(loaded.tasks)
        listing = f"the instance_id fields of {tasks_file}"
    if not task_ids:
        return tasks
    by_id = {task.instance_id: task for task in tasks}
    missing = [task_id for task_id in task_ids if task_id not in by_id]
    if missing:
        raise ConfigError(f"unknown SWE task ids {missing}; see {listing}")
    return [by_id[task_id] for task_id in task_ids]


def reachable_prompts(admission: AdmissionController, reach: int) -> set[int]:
    """The prompt indices the next `reach` groups can take. Each epoch of the admission order
    is a permutation of every prompt, so 2 × (prompts) positions from any cursor hold a whole
    epoch: past that, every prompt is reachable (and `steps=10**9` costs nothing up front)."""
    every = admission.num_prompts
    if reach >= 2 * every:
        return set(range(every))
    return set(admission.peek_prompt_indices(reach))


def swe_tool_name(text: str) -> str | None:
    """The tool a model text calls (for the tool_wait hint), None if it calls none."""
    parsed = parse_action(text, swe_tool_specs())
    return parsed.name if isinstance(parsed, ParsedAction) else None


async def run_swe_rollout(
    config: RunConfig,
    base_dir: Path,
    run_dir: Path,
    *,
    on_batch: Callable[[Batch], None] | None = None,
    on_backend: Callable[[str], None] | None = None,
    resume_from: Checkpoint | None = None,
    metrics_port: int = 0,
    keep_batches: bool = True,
) -> SWERunResult:
    """Run `config.steps` training steps; configs are resolved from `base_dir` (absolute).

    A checkpoint is written into `run_dir` after every step. With `resume_from` (the run
    directory already cut back by `prepare_resume`) the run continues from that step.
    `metrics_port` > 0 serves the scheduler's health metrics live on /metrics (Prometheus).
    `keep_batches=False` keeps only each step's outline (a long run's memory stays flat).
    """
    policy = resolve_policy(config.policy)
    rollout = shape_rollout(
        config.rollout.load(RolloutConfig, base_dir),
        groups_per_step=config.groups_per_step,
        group_size=config.group_size,
        async_factor=config.async_factor,
        seed=config.seed,
    )
    pool_config = config.pool.load(PoolConfig, base_dir)
    swe_config = config.swe.load(SWEEnvConfig, base_dir)
    tasks_file = base_dir / config.tasks_file if config.tasks_file else None
    tasks = (
        [] if config.sources else select_tasks(config.task_ids, tasks_file, config.tasks_dataset)
    )
    clock, bus = LoopClock(), EventBus()
    tokenizer: Tokenizer = ByteTokenizer()
    chat_format: Callable[[], ChatFormat] | None = None
    hf_tokenizer: HFTokenizer | None = None
    if config.tokenizer_path:
        hf_tokenizer = HFTokenizer(config.tokenizer_path)
        tokenizer, chat_format = hf_tokenizer, HFChatFormat.factory(hf_tokenizer)
    sources: tuple[RunSource, ...] = ()
    layout: SourceLayout | None = None
    if config.sources:
        sources = load_run_sources(
            config,
            base_dir,
            tokenizer=tokenizer,
            hf_tokenizer=hf_tokenizer,
            swe_config=swe_config,
            select_tasks=select_tasks,
        )
        layout = SourceLayout.of([source.prompts() for source in sources])
    num_prompts = len(tasks) if layout is None else layout.num_prompts
    agent: ScriptedSWEAgent | None = None
    connect: Callable[[], Awaitable[list[Engine]]]
    if config.engine_backend == "sim":
        model = config.model.load(ServedModelConfig, base_dir)
        engine_config = engine_config_for(policy, config.engine.load(SimEngineConfig, base_dir))
        scripted = agent = ScriptedSWEAgent(tokenizer, config.scripted)

        async def connect() -> list[Engine]:
            return [build_sim_engine(engine_config, model, scripted)]

        described_engine: dict[str, Any] = {
            "engine": engine_config.model_dump(mode="json"),
            "model": model.model_dump(mode="json"),
        }
    else:
        assert config.sglang is not None  # RunConfig checks it
        sglang_config = config.sglang.load(SGLangEngineConfig, base_dir)

        async def connect() -> list[Engine]:
            return await connect_sglang_engines(sglang_config, encode=tokenizer.encode)

        described_engine = {"sglang": sglang_config.model_dump(mode="json")}
    agent_fn = load_agent(config.agent_api.agent, base_dir) if config.agent_api.agent else None
    sandbox_spec = SandboxSpec(
        pool_config.backend,
        TaskImageConfig(
            agent_uid=numeric_uid(pool_config.container.user, pool_config.container.auto_uid)
        ),
        pool_config.workdir,
        pool_config.container,
        pool_config.exec,
    )
    runtime = sandbox_spec.build()
    sandboxes_for(sandbox_spec, existing=runtime)  # env factories off the pool grade on it
    ray_config = config.ray.load(RayPoolConfig, base_dir) if config.ray is not None else None
    backend = runtime.backend.name
    if on_backend is not None:
        on_backend(backend)
    # Only the tasks this run can reach need an image: at most (steps + async_factor) × B
    # groups are ever admitted, and the pool looks one batch further ahead.
    reach = (config.steps + config.async_factor + 1) * config.groups_per_step
    admission = AdmissionController(
        rollout.admission, num_prompts, layout.sources if layout else ()
    )
    reachable = reachable_prompts(admission, reach)
    images: dict[int, str] = {}
    per_source: dict[str, dict[int, str]] = {}
    if layout is None:
        images = {index: await runtime.ensure_image(tasks[index]) for index in sorted(reachable)}
    else:
        per_source = await source_images(sources, layout, reachable, runtime)
    every_image = {*images.values(), *(i for s in per_source.values() for i in s.values())}
    described: dict[str, Any] = {
        "run": config.model_dump(mode="json"),
        "policy": policy.model_dump(mode="json"),
        **described_engine,
        "backend": backend,
        "base_dir": str(base_dir),  # where `run`'s config paths resolve (resume)
    }
    steps_done = 0 if resume_from is None else resume_from.steps_done
    resumed_at_s = 0.0 if resume_from is None else resume_from.last_step_t_s
    main_task = asyncio.current_task()
    assert main_task is not None

    def stop_on_write_failure(_: RunFileWriteError) -> None:
        main_task.cancel()  # stop cleanly; the error is raised below

    recorder = RunRecorder(
        run_dir,
        described,
        origin_s=clock.now() - resumed_at_s,
        on_write_failure=stop_on_write_failure,
    )
    recorder.attach(bus)
    watchdog = LoopWatchdog(config.watchdog, bus, clock).start()  # stalls into events.jsonl

    batches: list[Batch] = []  # whole, for the caller (unless keep_batches is False)
    outlines: list[BatchOutline] = []

    health: RunHealth | None = None

    def record(batch: Batch) -> None:
        if health is not None:
            health.on_batch(batch)
        if keep_batches:
            batches.append(batch)
        outlines.append(batch.outline())
        recorder.step(batch)
        if on_batch is not None:
            on_batch(batch)

    def env_for(prompt_index: int) -> PooledEnv:
        task = tasks[prompt_index]
        image = images.get(prompt_index)
        if image is None:
            raise RolloutError(f"no image was prepared for task {task.instance_id}")
        factory = SWEEnvFactory(task, swe_config, sandbox_spec, image)
        return PooledEnv(factory, image, {"task_id": task.instance_id})

    def on_open(session_id: str, sample: SampleRef) -> None:
        if agent is not None:  # a remote model reads its task from the prompt
            agent.register(session_id, tasks[sample.group.prompt_index], sample.sample_id)

    engines: list[Engine] = []
    try:
        engines = await connect()
        if config.engine_faults.enabled:
            engines = [FaultyEngine(engine, config.engine_faults) for engine in engines]
        # One EnvPool on the run's backend, or one per pool.hosts daemon (images copied there).
        lease_pool = build_pool(
            pool_config,
            runtime.backend,
            bus=bus,
            clock=clock,
            images=sorted(every_image),
            ray=ray_config,
        )
        async with (
            lease_pool as pool,
            _agent_server(config.agent_api) as server,
        ):
            session_options: dict[str, Any] = {
                "system_prompt": config.system_prompt,
                "priorities": (config.agent_loop.high_priority, config.agent_loop.low_priority),
                "tool_of": swe_tool_name,
                "tool_result_chars": config.agent_loop.tool_result_chars,
                "on_open": on_open,
                "chat_format": chat_format,
            }
            sessions: SessionFactory
            if layout is not None:  # a mixed run: each source's sessions, by prompt index
                sessions = sourced_sessions(
                    sources,
                    layout,
                    pool,
                    images=per_source,
                    tokenizer=tokenizer,
                    swe_config=swe_config,
                    sandbox_spec=sandbox_spec,
                    agent=agent,
                    scripted=config.scripted,
                    priorities=session_options["priorities"],
                    tool_result_chars=config.agent_loop.tool_result_chars,
                )
            elif server is None:
                sessions = PoolSessions(pool, env_for, tokenizer, **session_options)
            else:  # a bring-your-own agent plays each sample through the chat API
                assert agent_fn is not None
                sessions = CaptureSessions(
                    pool,
                    env_for,
                    tokenizer,
                    agent=agent_fn,
                    server=server,
                    tools=openai_tool_schemas(swe_tool_specs(pool_config.workdir)),
                    call_timeout_s=config.agent_api.call_timeout_s,
                    **session_options,
                )
            conductor = Conductor(
                rollout=rollout,
                policy=policy,
                agent_loop=config.agent_loop,
                config=config.conductor,
                engines=engines,
                sessions=sessions,
                num_prompts=num_prompts,
                sources=layout.sources if layout is not None else (),
                sink=TrajectorySink(config.group_size, recorder.trajectory_writers()),
                bus=bus,
                clock=clock,
                on_timeseries=recorder.timeseries,
                # A resumed run restores scheduler state replay cannot rebuild: not logged.
                decisions=recorder.decision_log()
                if config.conductor.decision_log and resume_from is None
                else None,
            )
            if resume_from is not None:
                conductor.load_state_dict(resume_from.conductor_state)
            health = RunHealth(
                starvation_bound_s=rollout.scheduler.starvation_bound_s,
                step_budget_s=config.conductor.deadline.step_budget_s,
                metrics_port=metrics_port,
            )
            health.attach(conductor)

            def checkpoint(batch: Batch) -> None:
                state = Checkpoint(
                    steps_done=conductor.stats.batches,
                    conductor_state=conductor.state_dict(),
                    base_dir=str(base_dir),
                    last_step_t_s=batch.complete_s - recorder.origin_s,
                )
                write_checkpoint(run_dir, state)

            async with conductor:
                trainer = SimulatedTrainer(config.trainer, on_batch=record, on_trained=checkpoint)
                digests = await trainer.run(conductor, config.steps - steps_done)
                elapsed_s = clock.now() - conductor.origin_s
                busy_s = _sim_busy_s(engines)
                health.finish(conductor, run_dir)
    except asyncio.CancelledError:
        if recorder.write_failure is None:
            raise
        main_task.uncancel()  # the cancel was ours: the run stops with the disk error
        raise recorder.write_failure from None
    finally:
        try:
            watchdog.stop()
            if health is not None:
                health.close()
            for engine in engines:
                await engine.aclose()
            recorder.close()
        finally:
            runtime.close()
    summary = summarize_conductor_run(
        policy.name, digests, conductor, elapsed_s=elapsed_s, busy_s=busy_s
    )
    return SWERunResult(tuple(batches), summary, run_dir, backend, elapsed_s, tuple(outlines))


def _sim_busy_s(engines: Sequence[Engine]) -> float:
    """The simulated engines' busy time, summed (0 for real servers)."""
    served = [engine.inner if isinstance(engine, FaultyEngine) else engine for engine in engines]
    busy = [engine.counters.busy_s for engine in served if isinstance(engine, SimEngine)]
    return sum(busy)


@contextlib.asynccontextmanager
async def _agent_server(config: AgentApiConfig) -> AsyncIterator[AgentApiServer | None]:
    """The capture endpoint when the run has a bring-your-own agent, else None."""
    if not config.agent:
        yield None
        return
    async with AgentApiServer(
        config.model, config.host, config.port, max_body_mb=config.max_body_mb
    ) as server:
        yield server
