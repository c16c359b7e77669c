"""Per-step deadlines of the conductor: truncate and cancel so a step ends near its budget.

`StepDeadlines` is the deadline half of `Conductor` (rollout/runtime/conductor.py): with
`conductor.deadline.step_budget_s` set, `batches()` waits for B groups through
`_await_by_deadline`, which, as the deadline nears, truncates the stragglers of the groups
closest to completion and cancels generations that cannot help the step (the plan is the pure
`rollout.core.deadline`); a step that still lacks groups at its deadline waits or proceeds
short. It reads the conductor's state (sink, admission, dispatcher, engines) and is mixed into
`Conductor`; it owns the hold that keeps this step's cancelled generations from resuming.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from foundation.clock import Clock
from rollout.core.admission import AdmissionController
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
from rollout.engines.base import Engine, EngineError
from rollout.errors import SchedulerError
from rollout.runtime.agent_loop import AgentLoop
from rollout.runtime.config import ConductorConfig
from rollout.runtime.dispatch import Dispatcher
from rollout.runtime.loop_host import GenerationTicket
from rollout.trajectories.sink import TrajectorySink

__all__ = ["StepDeadlines"]


class StepDeadlines:
    """The per-step deadline of `Conductor` (see the module docstring)."""

    # The conductor state the deadline reads (set by `Conductor.__init__`).
    _config: ConductorConfig
    _clock: Clock
    _sink: TrajectorySink
    _admission: AdmissionController
    _dispatcher: Dispatcher
    _engines: Mapping[str, Engine]
    _completed_s: dict[str, float]
    _done_samples: dict[str, int]
    _group_ready: asyncio.Event
    _step_deadline_s: float | None
    _hold: asyncio.Event | None

    def _note(self, kind: str, **fields: Any) -> None:
        raise NotImplementedError

    def _ready_groups(self) -> int:
        raise NotImplementedError

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
            ready = self._ready_groups()
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
                ready = self._ready_groups()
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
