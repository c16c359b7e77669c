"""`Conductor`: the rollout shell that admits groups, runs their samples and streams batches.

It owns, for one run:

* **admission** (`AdmissionController`): at training step k at most (k + async_factor)·B
  groups have been admitted; new groups start as soon as the quota allows;
* **samples**: one `AgentLoop` task per sample, retried on engine or infrastructure failure;
  with trajectory-level slot holding a sample first waits for an agent slot;
* **scheduling** (`Dispatcher` around the pure `RolloutScheduler`): generation slots,
  preemption (`engine.abort`), priority changes (act slots, KV hints);
* **priority** (`PriorityKeeper`): critical groups recomputed at every turn boundary;
* **the sink**: finished samples become groups; `batches()` yields B complete groups;
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
import contextlib
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from harness.clock import Clock, LoopClock
from harness.errors import HarnessError
from harness.events import EventBus
from rollout.core.admission import AdmissionController
from rollout.core.classes import PriorityClass
from rollout.core.config import RolloutConfig
from rollout.core.deadline import (
    DeadlinePhase,
    DeadlinePlan,
    GroupProgress,
    StepDeadline,
    deadline_phase,
    plan_truncation,
    proceeds_short,
    request_deadline,
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
from rollout.errors import RolloutError, SchedulerError
from rollout.observe.timeseries import EngineCounters, TimeseriesSampler
from rollout.runtime.agent_loop import AgentLoop
from rollout.runtime.config import (
    AgentLoopConfig,
    ConductorConfig,
    PolicyConfig,
    rollout_config_for,
)
from rollout.runtime.dispatch import DispatchCounts, Dispatcher, scheduler_view
from rollout.runtime.env_session import SampleRef, SessionFactory
from rollout.runtime.live_gate import LiveKVGate
from rollout.runtime.loop_host import GenerationTicket
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
    batches: int = 0


class Conductor:
    """See the module docstring. Use as `async with Conductor(...) as conductor:`.

    Args:
        rollout: the decision cores' config; the policy's flags are applied on top.
        policy: which rollout policy or baseline to behave as (`rollout.jobs.policies`).
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
        policy: PolicyConfig,
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
        self.rollout = rollout_config_for(policy, rollout)
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
        self._agent_slots: asyncio.Semaphore | None = None
        self._live_gate: LiveKVGate | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._children: set[asyncio.Task[None]] = set()
        # retired_requests=cancel: samples with tokens of the current version, each live
        # sample's run (cancelled and started again when a weight update retires its group),
        # and runs that ended just before their group was retired (run again, not kept)
        self._spent: set[str] = set()
        self._runs: dict[str, asyncio.Task[Trajectory]] = {}
        self._stale: set[str] = set()
        self.stats = ConductorStats(dispatch=self._dispatcher.counts)

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
        slots = 0
        for name, engine in self._engines.items():
            if self._policy_version:  # restored from a checkpoint
                await engine.update_weights(self._policy_version)
            stats = engine.stats()
            slots += stats.max_running_requests
            self.report(EngineAdded(name, scheduler_view(stats), self._clock.now()))
        self._timeseries = TimeseriesSampler(self._engines, self._counters, self._origin_s)
        if self.policy.slot_holding == "trajectory":
            self._agent_slots = asyncio.Semaphore(self._config.agent_slots or slots)
        elif self.policy.live_kv_budget > 0:
            capacity = sum(engine.stats().kv_capacity_tokens for engine in self._engines.values())
            budget = self.policy.live_kv_budget * capacity
            # Until contexts are reported, a newcomer counts as one slot's share of the budget.
            self._live_gate = LiveKVGate(budget, prior_first_tokens=budget / max(1, slots))
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
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

    @property
    def engine_counters(self) -> Mapping[str, EngineCounters]:
        return self._counters

    def observe_scheduler(
        self, observer: Callable[[SchedulerEvent, Sequence[Decision]], None]
    ) -> None:
        """Call `observer(event, decisions)` after every scheduler event (health metrics)."""
        self._dispatcher.add_observer(observer)

    async def batches(self) -> AsyncGenerator[Batch, None]:
        """B complete groups at a time, forever; consuming a batch frees no quota until
        `update_weights` records the training step."""
        size = self.rollout.admission.groups_per_batch
        while True:
            requested_s = self._clock.now()
            deadline: StepDeadline | None = None
            if self._config.deadline.step_budget_s is None:
                while self._sink.ready_groups < size:
                    self._group_ready.clear()
                    await self._group_ready.wait()
                take = size
            else:
                deadline = await self._await_by_deadline(requested_s, size)
                take = deadline.groups
            groups = self._sink.take_batch(take)
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

    # -- deadlines (rollout.core.deadline) -------------------------------------------------

    async def _await_by_deadline(self, requested_s: float, size: int) -> StepDeadline:
        """Wait for `size` ready groups, truncating and cancelling as the deadline nears;
        returns how many groups to take (fewer than `size` only for a `proceed` step)."""
        config = self._config.deadline
        assert config.step_budget_s is not None
        deadline_s = requested_s + config.step_budget_s
        self._step_deadline_s = deadline_s
        try:
            return await self._await_step(requested_s, deadline_s, size)
        finally:
            self._step_deadline_s = None
            self._lift_hold()

    async def _await_step(self, requested_s: float, deadline_s: float, size: int) -> StepDeadline:
        config = self._config.deadline
        assert config.step_budget_s is not None
        truncated: set[str] = set()
        cancelled: set[str] = set()
        hit = False
        while True:
            ready = self._sink.ready_groups
            if ready >= size:
                take, short = size, False
                break
            now = self._clock.now()
            phase = deadline_phase(now, deadline_s, config.truncate_margin_s)
            if phase is not DeadlinePhase.BEFORE:
                hit = True
                plan = plan_truncation(self._group_progress(), size - ready)
                if plan.hold and phase is DeadlinePhase.TRUNCATE:
                    self._hold = self._hold or asyncio.Event()
                else:  # nothing left to compete with, or past the deadline: resume them
                    self._lift_hold()
                await self._apply_plan(plan, truncated, cancelled)
                ready = self._sink.ready_groups
                if ready >= size:
                    continue
            if proceeds_short(phase, ready, size, proceed=config.short_batch == "proceed"):
                take, short = ready, True
                break
            self._group_ready.clear()
            # Past the truncation point, re-plan on a short period: samples that start later
            # (a late container, a retry) must be cut too.
            replan_s = now + config.replan_interval_s
            wake_s = {
                DeadlinePhase.BEFORE: deadline_s - config.truncate_margin_s,
                DeadlinePhase.TRUNCATE: min(deadline_s, replan_s),
            }.get(phase, replan_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None if wake_s is None else max(0.0, wake_s - now)):
                    await self._group_ready.wait()
        return StepDeadline(
            budget_s=config.step_budget_s,
            hit=hit,
            truncated=len(truncated),
            cancelled=len(cancelled),
            groups=take,
            wanted=size,
            short=short,
        )

    def _lift_hold(self) -> None:
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.set()

    @property
    def request_deadline_s(self) -> float | None:
        """The deadline of a generation request sent now (`rollout.core.deadline`)."""
        margin_s = self._config.deadline.truncate_margin_s
        return request_deadline(self._clock.now(), self._step_deadline_s, margin_s)

    def _note(self, kind: str, **fields: Any) -> None:
        """Record a conductor decision in the decision log, if one is kept."""
        if self._decisions is not None:
            self._decisions.note(kind, self._clock.now(), **fields)

    def _group_progress(self) -> list[GroupProgress]:
        """The admitted groups not complete yet: what a deadline plan is made from."""
        progress = []
        for order, group in enumerate(self._admission.live_groups):
            if group.group_id in self._completed_s:
                continue  # ready, waiting for the trainer
            running: list[str] = []
            generating: set[str] = set()
            for sample_id in group.sample_ids():
                loop = self._live_loop(sample_id)
                if loop is None:
                    continue
                running.append(sample_id)
                if loop.generation_in_flight is not None:
                    generating.add(sample_id)
            done = self._done_samples.get(group.group_id, 0)
            progress.append(
                GroupProgress(
                    group.group_id, group.size, done, tuple(running), frozenset(generating), order
                )
            )
        return progress

    def _live_loop(self, sample_id: str) -> AgentLoop | None:
        try:
            target = self._dispatcher.channel(sample_id).target
        except SchedulerError:
            return None
        return target if isinstance(target, AgentLoop) else None

    async def _apply_plan(
        self, plan: DeadlinePlan, truncated: set[str], cancelled: set[str]
    ) -> None:
        """Truncate and cancel what `plan` says; a generation is cancelled at most once a step."""
        for sample_id in plan.truncate:
            loop = self._live_loop(sample_id)
            if loop is None or loop.truncation_reason is not None:
                continue  # (a retried attempt is a new loop: it is truncated too)
            truncated.add(sample_id)
            self._note("truncate", sample_id=sample_id, reason="deadline")
            await loop.truncate("deadline", cut_tool_call=self._config.deadline.cut_tool_calls)
            if loop.waiting_for_generation:  # hand it a ticket so it notices, and ends
                with contextlib.suppress(SchedulerError):
                    wake = GenerationTicket(sample_id, "", "", high=False, abort_requested=True)
                    self._dispatcher.channel(sample_id).offer(wake)
        for sample_id in plan.cancel:
            loop = self._live_loop(sample_id)
            ticket = None if loop is None else loop.generation_in_flight
            if ticket is None or sample_id in cancelled:
                continue
            cancelled.add(sample_id)  # aborted now, resumed from its partial output later
            ticket.abort_requested = True
            ticket.abort_reason = "deadline: cannot help this step"
            ticket.hold = self._hold  # (None: it may resume at once)
            held = ticket.hold is not None
            reason = ticket.abort_reason
            self._note("cancel", sample_id=sample_id, rid=ticket.rid, held=held, reason=reason)
            with contextlib.suppress(EngineError, OSError):
                await self._engines[ticket.engine].abort(ticket.rid)

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

    # -- admission and samples -------------------------------------------------------------

    async def _admit_groups(self) -> None:
        lookahead = self.rollout.admission.groups_per_batch
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

    async def _run_sample(self, group: Group, index: int) -> None:
        slot = self._agent_slots or contextlib.nullcontext()
        sample_id = make_sample_id(group.group_id, group.attempt, index)
        async with slot:
            if self._live_gate is not None:
                await self._live_gate.enter(sample_id)
            try:
                trajectory = await self._on_policy_attempts(group, index)
            finally:
                if self._live_gate is not None:
                    self._live_gate.leave(sample_id)
        if self._config.retired_requests == "cancel" and not self._fits_group(group, trajectory):
            self._spawn(self._run_sample(group, index), sample_id)  # its group moved on: again
            return
        if group.source:
            klass = self._source_classes.get(group.source, PriorityClass.NORMAL)
            info = {**trajectory.info, "source": group.source, "priority_class": str(klass)}
            trajectory = replace(trajectory, info=info)
        self._complete(trajectory)

    async def _on_policy_attempts(self, group: Group, index: int) -> Trajectory:
        """`_attempts`; under `retired_requests: cancel`, started again from scratch each time a
        weight update retires its group, until its tokens have one policy version."""
        if self._config.retired_requests == "resume":
            return await self._attempts(group, index)
        sample_id = make_sample_id(group.group_id, group.attempt, index)
        while True:
            self._spent.discard(sample_id)
            run = asyncio.ensure_future(self._attempts(group, index))
            self._runs[sample_id] = run
            try:
                trajectory = await run
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not run.cancelled() or (current is not None and current.cancelling()):
                    raise  # the conductor is closing, not a retired-version restart
                self.stats.restarted_samples += 1
                continue
            finally:
                self._runs.pop(sample_id, None)
                self._spent.discard(sample_id)
            stale = sample_id in self._stale  # ended just before its group was retired
            self._stale.discard(sample_id)
            if not stale and len(set(_generated_versions(trajectory))) <= 1:
                return trajectory
            self.stats.restarted_samples += 1  # an update slipped past the cancel: run again

    def _retire_groups(self) -> None:
        """`retired_requests: cancel` at a weight update: every group not complete yet that
        holds tokens of the version just retired is re-run as a whole (one version per group,
        as GRPO compares a group's samples): its generating samples are cancelled and start
        again, its finished ones leave the sink and run again. Groups that generated nothing
        yet, and complete groups (written once, one version each), are left alone."""
        spent, self._spent = self._spent, set()
        for group in self._admission.live_groups:
            if group.group_id in self._completed_s:
                continue
            members = group.sample_ids()
            pending = self._sink.pending_members(group.group_id)
            finished = [t for t in pending if _generated_versions(t)]
            if not finished and spent.isdisjoint(members):
                continue
            self.stats.restarted_groups += 1
            for sample_id in members:
                run = self._runs.get(sample_id)
                if run is None:
                    continue  # (not started: nothing to retire)
                if run.done():
                    self._stale.add(sample_id)  # ended, not in the sink yet: run it again
                elif sample_id in spent:
                    run.cancel()  # starts again in _on_policy_attempts
            self._rerun(group, [t.sample_id for t in finished])

    def _fits_group(self, group: Group, trajectory: Trajectory) -> bool:
        """Whether `trajectory` may join its group's finished samples (cancel mode): their
        generated tokens share one policy version. If not, the samples of older versions are
        run again (this one included: False)."""
        versions = {
            t.sample_id: set(_generated_versions(t))
            for t in self._sink.pending_members(group.group_id)
        }
        versions[trajectory.sample_id] = set(_generated_versions(trajectory))
        seen = {version for each in versions.values() for version in each}
        if len(seen) <= 1:
            return True
        newest = max(seen)
        old = [s for s, v in versions.items() if v and v != {newest}]
        self.stats.restarted_groups += 1
        self._rerun(group, [s for s in old if s != trajectory.sample_id])
        if trajectory.sample_id in old:
            self.stats.restarted_samples += 1
            return False
        return True

    def _rerun(self, group: Group, sample_ids: Sequence[str]) -> None:
        """Take `sample_ids` of `group` back from the sink and run each again from scratch."""
        for trajectory in self._sink.discard(group.group_id, sample_ids):
            self.stats.restarted_samples += 1
            self._done_samples[group.group_id] -= 1
            self._keeper.sample_restarted(trajectory)
            self._spawn(self._run_sample(group, trajectory.sample_index), trajectory.sample_id)

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
    ) -> None:
        if sample_id and result.output_ids and sample_id in self._runs:  # retired_requests=cancel
            self._spent.add(sample_id)
        self._counters[engine].count(
            request,
            result,
            computed_prefix_tokens=computed_prefix_tokens,
            page_tokens=self._loop_config.recompute_page_tokens,
        )
        if self._live_gate is not None and sample_id:
            self._live_gate.update(sample_id, len(request.input_ids) + len(result.output_ids))
        stats = scheduler_view(self._engines[engine].stats())
        self.report(EngineStatsUpdated(engine, stats, self._clock.now()))

    def turn_boundary(self, progress: SampleProgress) -> None:
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


def _generated_versions(trajectory: Trajectory) -> list[int]:
    """The policy versions of the tokens the model generated (loss-mask 1)."""
    return [v for v, m in zip(trajectory.versions, trajectory.loss_mask, strict=True) if m]
