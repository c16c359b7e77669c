"""`Dispatcher`: feeds the pure scheduler and carries out its decisions.

`report(event)` is synchronous: the scheduler handles the event and each decision is applied
at once — a `StartGeneration` becomes a `GenerationTicket` (with a fresh request id) handed to
the sample's `SampleChannel`, a `Preempt` flags the victim's ticket, a `PriorityChanged`
re-prioritizes the sample's env lease. What needs I/O (aborting a request, sending a KV hint)
is queued in order and done by `run()`, a task the conductor owns, so reporting never yields
to other tasks halfway through a decision. `scheduler_view` is how engine stats are shown to
the scheduler's KV throttle.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rollout.core.decision_log import DecisionLog
from rollout.core.scheduler import RolloutScheduler
from rollout.core.scheduler_events import (
    Decision,
    EngineLoad,
    GenerationAborted,
    Preempt,
    PriorityChanged,
    Promote,
    SchedulerEvent,
    StartGeneration,
)
from rollout.engines.base import Engine, EngineError, EngineStats, KVHint, KVHintKind, kv_headroom
from rollout.errors import SchedulerError
from rollout.runtime.loop_host import GenerationTicket

__all__ = ["DispatchCounts", "Dispatcher", "PriorityTarget", "SampleChannel", "scheduler_view"]

log = logging.getLogger(__name__)


class PriorityTarget(Protocol):
    """What a priority change reaches besides the engine: the sample's env (act slots)."""

    def set_priority(self, high: bool) -> None: ...

    @property
    def session_id(self) -> str | None: ...


class SampleChannel:
    """Hands one sample its generation tickets, one at a time, in the order they are decided."""

    def __init__(self, sample_id: str) -> None:
        self.sample_id = sample_id
        self.ticket: GenerationTicket | None = None  # the latest one (the one a Preempt flags)
        self.target: PriorityTarget | None = None
        self._pending: GenerationTicket | None = None
        self._waiter: asyncio.Future[GenerationTicket] | None = None

    def offer(self, ticket: GenerationTicket) -> None:
        if self._pending is not None:
            raise SchedulerError(
                f"sample {self.sample_id} was given a slot while another ticket is unused; "
                "the scheduler started it twice"
            )
        self.ticket = ticket
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(ticket)
        else:
            self._pending = ticket

    async def take(self) -> GenerationTicket:
        """The next ticket; waits until the scheduler decides one."""
        if self._pending is not None:
            ticket, self._pending = self._pending, None
            return ticket
        waiter: asyncio.Future[GenerationTicket] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            return await waiter
        finally:
            self._waiter = None


@dataclass(slots=True)
class DispatchCounts:
    """What the decisions did so far."""

    starts: int = 0
    preemptions: int = 0
    interruptions: int = 0
    priority_changes: int = 0


class Dispatcher:
    """Owns the scheduler and the sample channels; see the module docstring."""

    def __init__(
        self,
        scheduler: RolloutScheduler,
        engines: Mapping[str, Engine],
        *,
        kv_hints: bool,
        priorities: tuple[int, int],
        seed: int,
        decisions: DecisionLog | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.decisions = decisions  # records every event and decision (decisions.jsonl)
        self.policy_version: int | None = None  # written into decision records when known
        self._last_rid: str | None = None
        self.counts = DispatchCounts()
        self._engines = engines
        self._kv_hints = kv_hints
        self._priorities = priorities
        self._rng = random.Random(seed)
        self._channels: dict[str, SampleChannel] = {}
        self._work: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        # called as observer(event, decisions) after each report (health metrics, issue 15)
        self._observers: list[Callable[[SchedulerEvent, Sequence[Decision]], None]] = []

    def add_observer(self, observer: Callable[[SchedulerEvent, Sequence[Decision]], None]) -> None:
        """Call `observer(event, decisions)` after every `report` (read-only side channel)."""
        self._observers.append(observer)

    # -- channels --------------------------------------------------------------------------

    def open_channel(self, sample_id: str) -> SampleChannel:
        channel = SampleChannel(sample_id)
        self._channels[sample_id] = channel
        return channel

    def close_channel(self, sample_id: str) -> None:
        self._channels.pop(sample_id, None)

    def channel(self, sample_id: str) -> SampleChannel:
        try:
            return self._channels[sample_id]
        except KeyError:
            raise SchedulerError(f"sample {sample_id} has no open channel") from None

    # -- events in, decisions out ----------------------------------------------------------

    def report(self, event: SchedulerEvent) -> None:
        """Hand `event` to the scheduler and apply what it decides."""
        if isinstance(event, GenerationAborted):
            ticket = self.channel(event.sample_id).ticket
            if ticket is not None and ticket.abort_requested:
                self.counts.preemptions += 1
            else:
                self.counts.interruptions += 1
        log = self.decisions
        if log is not None:
            log.event(event)
        decided = list(self.scheduler.handle(event))
        for decision in decided:
            self._last_rid = None
            self._apply(decision)
            if log is not None:
                log.decision(decision, rid=self._last_rid, policy_version=self.policy_version)
        for observer in self._observers:
            observer(event, decided)

    def _apply(self, decision: Decision) -> None:
        match decision:
            case StartGeneration(sample_id=sample_id, engine=engine, high=high, resume=resume):
                self.counts.starts += 1
                rid = self._new_rid(sample_id)
                self.channel(sample_id).offer(
                    GenerationTicket(sample_id, engine, rid, high=high, resume=resume)
                )
            case Preempt(sample_id=sample_id, engine=engine, reason=reason):
                ticket = self.channel(sample_id).ticket
                if ticket is None:
                    raise SchedulerError(f"preempting {sample_id}, which never got a slot")
                ticket.abort_requested = True
                ticket.abort_reason = reason
                rid, target = ticket.rid, self._engines[engine]
                self._work.put_nowait(lambda: target.abort(rid))
            case PriorityChanged(sample_id=sample_id, high=high):
                self.counts.priority_changes += 1
                self._change_priority(sample_id, high)
            case Promote():
                pass  # the scheduler already requeued it; nothing to carry out

    def _change_priority(self, sample_id: str, high: bool) -> None:
        channel = self._channels.get(sample_id)
        if channel is None or channel.target is None:
            return  # between attempts: the next attempt reads the current priority
        channel.target.set_priority(high)
        engine_name = self.scheduler.engine_of(sample_id)
        session_id = channel.target.session_id
        if not self._kv_hints or engine_name is None or session_id is None:
            return
        engine = self._engines[engine_name]
        hint = KVHint(
            KVHintKind.SET_PRIORITY,
            session_id,
            self._priorities[0] if high else self._priorities[1],
        )
        self._work.put_nowait(lambda: engine.send_kv_hints([hint]))

    def _new_rid(self, sample_id: str) -> str:
        """`sample_id/<uuid hex>`: unique per segment, fixed length, so never another's prefix.

        Drawn from a seeded generator (not uuid4) so a simulated run is reproducible.
        """
        rid = f"{sample_id}/{uuid.UUID(int=self._rng.getrandbits(128), version=4).hex}"
        self._last_rid = rid
        return rid

    # -- the I/O side ----------------------------------------------------------------------

    async def run(self) -> None:
        """Carry out queued aborts and hints in order, forever (the conductor cancels it)."""
        while True:
            work = await self._work.get()
            try:
                await work()
            except EngineError as exc:  # best effort: a lost abort or hint costs speed only
                log.warning("engine call for a scheduler decision failed: %s", exc)


def scheduler_view(stats: EngineStats) -> EngineLoad:
    """Engine stats as the scheduler (and its KV throttle) should read them.

    Evictable prefix cache counts as free (it is given up on demand), and an idle engine
    reports no KV in use: with nothing running there is nothing the throttle could protect.
    """
    if stats.running_requests == 0 and stats.waiting_requests == 0:
        used = 0
    else:
        evictable = int(stats.extra.get("kv_evictable_tokens", 0))
        used = max(0, stats.kv_used_tokens - evictable)
    headroom = kv_headroom(used, stats.kv_capacity_tokens)  # (a copy of the stats just for it
    # costs more than the rest of this view: it runs after every generation)
    host = int(stats.extra.get("kv_host_capacity_tokens", 0))
    return EngineLoad(stats.max_running_requests, headroom, stats.kv_capacity_tokens, host)
