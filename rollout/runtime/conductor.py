"""`Conductor`: the rollout shell that admits groups, runs their samples and streams batches.

It owns, for one run:

* **admission** (`AdmissionController`): at training step k at most (k + async_factor)·B
  groups have been admitted; new groups start as soon as the quota allows;
* **samples**: one `AgentLoop` task per sample, retried on engine or infrastructure failure;
  a sample first passes the policy's live limit (an agent slot, the live-KV gate, ...); a
  limit that reads the engines is polled and may shed live groups (`ShedGroups`);
* **scheduling** (`Dispatcher` around the pure `RolloutScheduler`): generation slots,
  preemption (`engine.abort`), priority changes (act slots, KV hints);
* **priority** (`PriorityKeeper`): critical groups recomputed at every turn boundary;
* **the sink**: finished samples become groups; `batches()` yields B complete groups (from the
  oldest admitted ones, under `admission.consume_window`);
* **weights**: `update_weights(version)` pauses the engines (in-flight generations come back
  partial and resume later: *interrupted*), installs the version, resumes;
* **time series**: engine stats every `timeseries_interval_s` on the loop clock.

Structured concurrency: every task belongs to one `asyncio.TaskGroup` entered by `start()`;
`aclose()` cancels them and waits. Checkpoint with `state_dict()` at a step boundary and give
it to a fresh conductor's `load_state_dict()` before `start()`: unconsumed groups are re-run
from scratch, consumed ones never again (no loss, no duplicates).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from foundation.clock import Clock, LoopClock
from harness.errors import HarnessError
from harness.events import EventBus
from rollout.core.admission import AdmissionController
from rollout.core.classes import PriorityClass
from rollout.core.config import RolloutConfig
from rollout.core.deadline import (
    StepDeadline,
)
from rollout.core.decision_log import DecisionLog
from rollout.core.predictors import LengthPredictor, build_predictor
from rollout.core.priority_keeper import PriorityKeeper
from rollout.core.scheduler import RolloutScheduler
from rollout.core.scheduler_events import (
    Decision,
    EngineAdded,
    EnginePaused,
    EngineResumed,
    EngineStatsUpdated,
    PrioritiesChanged,
    SchedulerEvent,
)
from rollout.core.sources import SourcePrompts
from rollout.core.tool_latency import ToolLatencyEstimator
from rollout.core.types import Group, SampleProgress, Trajectory, make_sample_id
from rollout.engines.base import Engine, EngineError, GenerateRequest, GenerateResult
from rollout.errors import RolloutError
from rollout.observe.timeseries import EngineCounters, TimeseriesSampler
from rollout.runtime.agent_loop import AgentLoop
from rollout.runtime.config import AgentLoopConfig, ConductorConfig
from rollout.runtime.dispatch import DispatchCounts, Dispatcher, scheduler_view
from rollout.runtime.env_session import SampleRef, SessionFactory
from rollout.runtime.loop_host import GenerationTicket
from rollout.runtime.policy import LiveLimit, LiveLimitContext, PolledLiveLimit, RolloutPolicy
from rollout.runtime.retired_groups import RetiredGroups
from rollout.runtime.shed_groups import ShedGroups
from rollout.runtime.step_deadlines import StepDeadlines
from rollout.trajectories.batch import Batch
from rollout.trajectories.sink import TrajectorySink

__all__ = ["Conductor", "ConductorStats"]

_STATE_VERSION = 1


@dataclass(slots=True)
class ConductorStats:
    """Counters of one run (decisions, retries, completions)."""

    dispatch: DispatchCounts
    admitted_groups: int = 0
    finished_samples: int = 0
    retries: int = 0
    failed_samples: int = 0  # exhausted their attempts; kept with infra_error
    restarted_samples: int = 0  # retired_requests=cancel: re-run from scratch after an update
    restarted_groups: int = 0  # retired_requests=cancel: groups re-run as a whole
    shed_groups: int = 0  # the live limit shed them: re-run from scratch (ShedGroups)
    shed_samples: int = 0  # their running and finished samples, run again
    batches: int = 0


class Conductor(StepDeadlines, RetiredGroups, ShedGroups):
    """See the module docstring. Use as `async with Conductor(...) as conductor:`.

    Args:
        rollout: the decision cores' config, already shaped by the policy
            (`RolloutPolicy.shape_rollout`; the run's plan does it once).
        policy: which rollout policy or baseline to behave as (`rollout.jobs.policies`): its
            critical priority, KV hints and live-sample limit.
        agent_loop: per-sample limits and request settings.
        config: the conductor's own knobs.
        engines: inference engines, with unique names.
        sessions: opens each sample attempt's env.
        num_prompts: size of the prompt source the admission cursor walks (with `sources`:
            the sum of theirs).
        sources: task sources of a mixed run (`rollout.core.sources`); each group comes from
            one, with its group size, class and sampling overrides. Empty: one source.
        sink: where finished samples go (default: in memory only).
        predictor: remaining-length predictor (default: `rollout.predictor` config).
        bus, clock: step events and time (default: a fresh bus, the loop clock).
        on_timeseries: receives each `timeseries.jsonl` record (times on `clock`).
    """

    def __init__(
        self,
        *,
        rollout: RolloutConfig,
        policy: RolloutPolicy,
        agent_loop: AgentLoopConfig,
        config: ConductorConfig,
        engines: Sequence[Engine],
        sessions: SessionFactory,
        num_prompts: int,
        sources: Sequence[SourcePrompts] = (),
        sink: TrajectorySink | None = None,
        predictor: LengthPredictor | None = None,
        bus: EventBus | None = None,
        clock: Clock | None = None,
        on_timeseries: Callable[[Mapping[str, Any]], None] | None = None,
        decisions: DecisionLog | None = None,
    ) -> None:
        names = [engine.name for engine in engines]
        if not engines or len(set(names)) != len(names):
            raise RolloutError(f"give at least one engine, with unique names (got {names})")
        self.policy = policy
        self.rollout = rollout
        self._loop_config = agent_loop
        self._config = config
        self._engines = {engine.name: engine for engine in engines}
        self._sessions = sessions
        self._sink = sink or TrajectorySink(self.rollout.admission.group_size)
        self._bus = bus or EventBus()
        self._clock = clock or LoopClock()
        self._on_timeseries = on_timeseries
        self._admission = AdmissionController(self.rollout.admission, num_prompts, sources)
        self._source_loops = {  # each source's agent loop: the run's, with its sampling
            source.config.name: AgentLoopConfig.model_validate(
                {**agent_loop.model_dump(), **source.config.sampling_overrides()}
            )
            for source in sources
        }
        self._source_classes = {s.config.name: s.config.priority_class for s in sources}
        self._keeper = PriorityKeeper(
            self.rollout.admission,
            self.rollout.priority,
            predictor or build_predictor(self.rollout.predictor),
            enabled=policy.critical_priority,
        )
        self._dispatcher = Dispatcher(
            RolloutScheduler(self.rollout.scheduler),
            self._engines,
            kv_hints=policy.kv_hints,
            priorities=(agent_loop.high_priority, agent_loop.low_priority),
            seed=config.seed,
            decisions=decisions,
        )
        if decisions is not None:  # the header replay rebuilds the scheduler from
            decisions.begin(self.rollout.scheduler)
        self._dispatcher.policy_version = 0
        self._tools = ToolLatencyEstimator(agent_loop.default_tool_wait_s)
        self._counters = {name: EngineCounters() for name in self._engines}
        self._timeseries: TimeseriesSampler | None = None
        self._completed_s: dict[str, float] = {}  # group -> when it became ready
        self._done_samples: dict[str, int] = {}  # group -> samples finished (deadline plans)
        self._step_deadline_s: float | None = None  # the waiting step's deadline (a budget)
        self._hold: asyncio.Event | None = None  # lifts the holds of this step's cancels
        self._decisions = decisions
        self._policy_version = 0
        self._origin_s = 0.0
        self._quota_changed = asyncio.Event()
        self._group_ready = asyncio.Event()
        self._live_limit: LiveLimit | None = None
        self._growth = policy.context_growth(
            self.rollout, self._loop_config.max_context_tokens
        )  # growth-aware live charges
        self._tasks: asyncio.TaskGroup | None = None
        self._children: set[asyncio.Task[None]] = set()
        # retired_requests=cancel: samples with tokens of the current version, each live
        # sample's run (cancelled and started again when a weight update retires its group),
        # and runs that ended just before their group was retired (run again, not kept)
        self._spent: set[str] = set()
        self._runs: dict[str, asyncio.Task[Trajectory]] = {}
        self._stale: set[str] = set()
        self._shed_runs: dict[str, asyncio.Task[Trajectory]] | None = None  # a PolledLiveLimit's
        self.stats = ConductorStats(dispatch=self._dispatcher.counts)
        self._held_taken: dict[str, float] = {}  # `held_sample_s` at the last take

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Conductor:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose(exc_type, exc, tb)

    async def start(self) -> None:
        """Register the engines and start admitting groups."""
        if self._tasks is not None:
            raise RolloutError("the conductor was already started; create a new one")
        self._origin_s = self._clock.now()
        slots = capacity = host_capacity = 0
        for name, engine in self._engines.items():
            if self._policy_version:  # restored from a checkpoint
                await engine.update_weights(self._policy_version)
            stats = engine.stats()
            slots += stats.max_running_requests
            capacity += stats.kv_capacity_tokens
            host_capacity += int(stats.extra.get("kv_host_capacity_tokens", 0))
            self.report(EngineAdded(name, scheduler_view(stats), self._clock.now()))
        self._timeseries = TimeseriesSampler(self._engines, self._counters, self._origin_s)
        admission = self.rollout.admission
        self._live_limit = limit = self.policy.live_limit(
            LiveLimitContext(
                slots,
                capacity,
                self._config.agent_slots,
                kv_host_capacity_tokens=host_capacity,
                max_context_tokens=self._loop_config.max_context_tokens,
                groups_per_step=admission.groups_per_step,
                group_size=admission.group_size,
                now_s=self._clock.now,
                group_size_of=self._group_size_of,
                shed_groups=self._shed_groups,
                recomputed_tokens=self._recomputed_tokens,
                newcomer_tokens=None if self._growth is None else self._growth.newcomer_tokens,
            )
        )
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        if isinstance(limit, PolledLiveLimit):
            self._shed_runs = {}
            self._spawn(self._poll_live_limit(limit), "live-limit-poll")
        self._spawn(self._admit_groups(), "admission")
        self._spawn(self._dispatcher.run(), "scheduler-decisions")
        if self._config.timeseries_interval_s > 0:
            self._spawn(self._sample_timeseries(), "timeseries")

    async def aclose(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        """Cancel every sample and background task, wait for them, close the sink.

        The arguments are the exception leaving the `async with` block, if any; a task that
        failed is re-raised here (in an exception group), never lost. When every failure is
        a known one (`HarnessError`: the Docker daemon is gone; `RolloutError`: the disk is
        full; `EngineError`: the engine stopped answering, e.g. at a weight update), the first
        is raised as itself, so the CLI can print its message instead of a group traceback.
        """
        tasks, self._tasks = self._tasks, None
        if tasks is None:
            return
        for task in sorted(self._children, key=lambda task: task.get_name()):
            task.cancel()
        try:
            await tasks.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            known, rest = group.split((HarnessError, RolloutError, EngineError))
            if known is None or rest is not None:
                raise
            raise _first_leaf(known) from group
        finally:
            self._record_timeseries()
            self._sink.close()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        assert self._tasks is not None, "start() the conductor first"
        task = self._tasks.create_task(coro, name=name)
        self._children.add(task)
        task.add_done_callback(self._children.discard)

    # -- the trainer interface -------------------------------------------------------------

    @property
    def policy_version(self) -> int:
        return self._policy_version

    @property
    def bus(self) -> EventBus:
        return self._bus

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def origin_s(self) -> float:
        """The clock reading at `start()`."""
        return self._origin_s

    @property
    def admission(self) -> AdmissionController:
        """The admission controller (read it; the conductor drives it)."""
        return self._admission

    def _recomputed_tokens(self) -> int:
        """KV the engines computed again because they had dropped it: a weight update's loss
        (every live sample pays it once, whatever the load) is no sign of KV pressure."""
        return sum(
            counters.recomputed_tokens - counters.recomputed_after_update_tokens
            for counters in self._counters.values()
        )

    @property
    def engine_counters(self) -> Mapping[str, EngineCounters]:
        return self._counters

    def held_sample_s(self) -> dict[str, float]:
        """Sample-seconds samples ready to generate have waited in the scheduler, by what held
        them, cumulative up to now (`rollout.core.held_samples`; live metrics read it)."""
        return self._dispatcher.scheduler.held_sample_s(self._clock.now())

    def take_held_sample_s(self) -> dict[str, float]:
        """`held_sample_s` since the last call: a training step's, when called as each batch
        is recorded."""
        totals = self.held_sample_s()
        taken = {
            reason: seconds - self._held_taken.get(reason, 0.0)
            for reason, seconds in totals.items()
            if seconds > self._held_taken.get(reason, 0.0)
        }
        self._held_taken = totals
        return taken

    def observe_scheduler(
        self, observer: Callable[[SchedulerEvent, Sequence[Decision]], None]
    ) -> None:
        """Call `observer(event, decisions)` after every scheduler event (health metrics)."""
        self._dispatcher.add_observer(observer)

    async def batches(self) -> AsyncGenerator[Batch, None]:
        """B complete groups at a time, forever; consuming a batch frees no quota until
        `update_weights` records the training step."""
        size = self.rollout.admission.groups_per_step
        while True:
            requested_s = self._clock.now()
            deadline: StepDeadline | None = None
            if self._config.deadline.step_budget_s is None:
                while self._ready_groups() < size:
                    self._group_ready.clear()
                    await self._group_ready.wait()
                take = size
            else:
                deadline = await self._await_by_deadline(requested_s, size)
                take = deadline.groups
            groups = self._sink.take_batch(take, self._admission.consumable())
            assert groups is not None
            group_ids = [group[0].group_id for group in groups]
            batch = Batch(
                step=self.stats.batches + 1,
                groups=tuple(groups),
                policy_version=self._policy_version,
                requested_s=requested_s,
                complete_s=max(self._completed_s.pop(group_id) for group_id in group_ids),
                ready_s=self._clock.now(),
                deadline=deadline,
            )
            self._admission.consume(batch.group_ids)
            for group_id in batch.group_ids:
                self._keeper.group_consumed(group_id)
                self._done_samples.pop(group_id, None)
            self.stats.batches += 1
            self._recompute_priorities()
            yield batch

    def _ready_groups(self) -> int:
        """Complete groups the next batch may take (within `admission.consume_window`)."""
        return self._sink.ready_among(self._admission.consumable())

    def _note(self, kind: str, **fields: Any) -> None:
        """Record a conductor decision in the decision log, if one is kept."""
        if self._decisions is not None:
            self._decisions.note(kind, self._clock.now(), **fields)

    async def update_weights(self, version: int) -> None:
        """Install policy `version` (= optimizer steps done) on every engine.

        Generations in flight are aborted by the pause and resume afterwards from their
        partial output (tokens keep the version that produced them); samples in a tool call
        are not disturbed. The admission quota grows by B.
        """
        if version <= self._policy_version:
            raise RolloutError(
                f"policy version must grow (now {self._policy_version}, got {version})"
            )
        engines = list(self._engines.items())
        for name, _ in engines:
            self.report(EnginePaused(name, self._clock.now()))
        await asyncio.gather(*(engine.pause() for _, engine in engines))
        # namespace isolation keeps every version's cache (a request only matches its own)
        flush = self._config.version_isolation == "flush"
        await asyncio.gather(
            *(engine.update_weights(version, flush_cache=flush) for _, engine in engines)
        )
        self._policy_version = version
        self._dispatcher.policy_version = version
        if self._config.retired_requests == "cancel":
            self._retire_groups()
        self._admission.set_training_step(version)
        await asyncio.gather(*(engine.resume() for _, engine in engines))
        for name, engine in engines:
            self.report(EngineResumed(name, self._clock.now()))
            self.report(EngineStatsUpdated(name, scheduler_view(engine.stats()), self._clock.now()))
        self._quota_changed.set()
        self._recompute_priorities()

    def state_dict(self) -> dict[str, Any]:
        """A JSON-ready checkpoint; take it between a batch and the next `batches()` step."""
        return {
            "version": _STATE_VERSION,
            "admission": self._admission.state_dict(),
            "policy_version": self._policy_version,
            "batches": self.stats.batches,
            # what the live gate learned of final contexts: a resumed run starts warm
            "live_growth": self._growth.state_dict() if self._growth is not None else {},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from `state_dict()`; call before `start()`."""
        if self._tasks is not None:
            raise RolloutError("load_state_dict() must come before start()")
        if state.get("version") != _STATE_VERSION:
            raise RolloutError(f"conductor state version {state.get('version')!r} is unknown")
        self._admission.load_state_dict(state["admission"])
        self._policy_version = int(state["policy_version"])
        self._dispatcher.policy_version = self._policy_version
        self.stats.batches = int(state["batches"])
        if self._growth is not None:
            self._growth.load_state_dict(state.get("live_growth", {}))

    # -- admission and samples -------------------------------------------------------------

    async def _admit_groups(self) -> None:
        lookahead = self.rollout.admission.groups_per_step
        while True:
            self._quota_changed.clear()
            for group in self._admission.admit():
                self._start_group(group)
            self._sessions.prewarm(self._admission.peek_prompt_indices(lookahead))
            await self._quota_changed.wait()

    def _start_group(self, group: Group) -> None:
        self.stats.admitted_groups += 1
        self._note(
            "admit",
            group_id=group.group_id,
            prompt_index=group.prompt_index,
            size=group.size,
            training_step=group.admitted_step,
            source=group.source or None,
        )
        self._sink.expect(group.group_id, group.size)
        self._keeper.add_group(group)
        for index in range(group.size):
            sample_id = make_sample_id(group.group_id, group.attempt, index)
            self._spawn(self._run_sample(group, index), sample_id)
        self._recompute_priorities()

    def _settle_growth(self, sample_id: str, attempt: Trajectory | None) -> None:
        """Teach the live charges where a sample's context ended; a shed, cancelled or failed
        attempt's context is not a final one, so it teaches nothing."""
        assert self._growth is not None
        if attempt is not None and attempt.infra_error is None:
            self._growth.finished(sample_id)
        else:
            self._growth.forget(sample_id)

    async def _run_sample(self, group: Group, index: int) -> None:
        sample_id = make_sample_id(group.group_id, group.attempt, index)
        limit = self._live_limit
        while True:
            if limit is not None:
                await limit.enter(sample_id)
            attempt = None
            try:
                attempt = await self._sheddable_attempts(group, index)
            finally:
                if limit is not None:
                    limit.leave(sample_id)
                if self._growth is not None:
                    self._settle_growth(sample_id, attempt)
            if attempt is not None:
                trajectory = attempt
                break  # else its group was shed: from scratch, through the limit again
        if self._config.retired_requests == "cancel" and not self._fits_group(group, trajectory):
            self._spawn(self._run_sample(group, index), sample_id)  # its group moved on: again
            return
        if group.source:
            klass = self._source_classes.get(group.source, PriorityClass.NORMAL)
            info = {**trajectory.info, "source": group.source, "priority_class": str(klass)}
            trajectory = replace(trajectory, info=info)
        self._complete(trajectory)

    async def _attempts(self, group: Group, index: int) -> Trajectory:
        """Run the sample until an attempt succeeds or `max_attempts` have failed."""
        sample_id = make_sample_id(group.group_id, group.attempt, index)
        loop_config = self._source_loops.get(group.source, self._loop_config)
        klass = self._source_classes.get(group.source, PriorityClass.NORMAL)
        attempts = loop_config.max_attempts
        for retry in range(attempts):
            ref = SampleRef(sample_id, group, index, retry, priority_class=klass)
            loop = AgentLoop(ref, self._sessions, self, loop_config)
            self._dispatcher.open_channel(sample_id).target = loop
            try:
                trajectory = await loop.run()
            finally:
                self._dispatcher.close_channel(sample_id)
            if trajectory.infra_error is None:
                if retry:  # what the sample cost: the failed attempts before this one
                    return replace(trajectory, info={**trajectory.info, "retries": retry})
                return trajectory
            if retry + 1 < attempts:
                self.stats.retries += 1
        self.stats.failed_samples += 1
        return replace(trajectory, info={**trajectory.info, "attempts": attempts})

    def _complete(self, trajectory: Trajectory) -> None:
        if (
            self._config.deadline.truncated_samples == "drop"
            and trajectory.info.get("truncation_reason") == "deadline"
        ):  # left out of training as an infra error is (its group still completes)
            trajectory = replace(trajectory, infra_error="deadline: truncated, dropped")
        self.stats.finished_samples += 1
        self._done_samples[trajectory.group_id] = self._done_samples.get(trajectory.group_id, 0) + 1
        self._keeper.sample_finished(trajectory)
        group = self._sink.add(trajectory)
        if group is not None:
            self._completed_s[trajectory.group_id] = self._clock.now()
            self._keeper.group_ready(trajectory.group_id)
            self._group_ready.set()
        self._recompute_priorities()

    def _recompute_priorities(self) -> None:
        assignment = self._keeper.refresh(self._admission.training_step)
        if assignment is not None:
            self.report(PrioritiesChanged(assignment, self._clock.now()))

    # -- LoopHost: what the agent loops call -----------------------------------------------

    @property
    def kv_hints(self) -> bool:
        return self.policy.kv_hints

    @property
    def cache_namespace(self) -> str:
        """The prefix-cache namespace of new requests: 'v<policy version>' under
        `version_isolation: namespace`, else '' (shared; the engines flush on an update)."""
        if self._config.version_isolation == "namespace":
            return f"v{self._policy_version}"
        return ""

    def report(self, event: SchedulerEvent) -> None:
        self._dispatcher.report(event)

    async def next_generation(self, sample_id: str) -> GenerationTicket:
        return await self._dispatcher.channel(sample_id).take()

    def engine(self, name: str) -> Engine:
        return self._engines[name]

    def is_critical(self, group_id: str) -> bool:
        return self._keeper.is_critical(group_id)

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
        if sample_id and result.output_ids and sample_id in self._runs:  # retired_requests=cancel
            self._spent.add(sample_id)
        self._counters[engine].count(
            request,
            result,
            computed_prefix_tokens=computed_prefix_tokens,
            page_tokens=self._loop_config.recompute_page_tokens,
            prefix_from_older_weights=prefix_from_older_weights,
        )
        if self._live_limit is not None and sample_id:
            context = len(request.input_ids) + len(result.output_ids)
            if self._growth is not None:
                self._growth.generated(sample_id, context)
                predicted = self._keeper.predicted_turns(sample_id)
                context = self._growth.charge(sample_id, context, predicted)
            self._live_limit.update(sample_id, context)
        stats = scheduler_view(self._engines[engine].stats())
        self.report(EngineStatsUpdated(engine, stats, self._clock.now()))

    def turn_boundary(self, progress: SampleProgress) -> None:
        if self._growth is not None:
            self._growth.turn_done(progress.sample_id, progress.context_tokens, progress.turns_done)
        self._keeper.update(progress)
        self._recompute_priorities()

    def expected_tool_s(self, tool: str | None) -> float:
        return self._tools.expected_s(tool)

    def tool_observed(self, tool: str | None, seconds: float) -> None:
        self._tools.observe(tool, seconds)

    def tool_wait_hinted(
        self, sample_id: str, engine: str, *, high: bool, tool: str | None, expected_s: float
    ) -> None:
        self._note(
            "offload",
            sample_id=sample_id,
            engine=engine,
            high=high,
            tool=tool or "",
            expected_s=expected_s,
            reason="tool wait: the KV manager offloads the session if the call outlasts "
            "the host round trip",
        )

    # -- time series -----------------------------------------------------------------------

    async def _sample_timeseries(self) -> None:
        while True:
            self._record_timeseries()
            await asyncio.sleep(self._config.timeseries_interval_s)

    def _record_timeseries(self) -> None:
        if self._on_timeseries is None or self._timeseries is None:
            return
        for record in self._timeseries.sample(self._clock.now()):
            self._on_timeseries(record)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
