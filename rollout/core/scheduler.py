"""The rollout scheduler: which sample gets which generation slot, and whom to preempt.

A pure decision core: `RolloutScheduler.handle(event)` applies one event and returns the
decisions it implies (the vocabulary lives in `rollout.core.scheduler_events` and is re-exported
here). No I/O, no clock (every event carries `now_s`), no asyncio, so it runs unchanged under
the real runtime and in virtual time. The shell (conductor / agent loop) carries the decisions
out and reports what happened as further events; a decision counts as done as soon as it is
returned (a started sample holds its slot at once).

Rules (DESIGN.md §2–3):

* **Order.** When an engine has a free slot it takes the first waiting sample in the order of
  `QueueLevel`: (1) interrupted, high; (2) back from the environment, high; (3) interrupted,
  low; (4) back from the environment, low; (5) new, low; first come (in the order the
  events reported them), first served within a level. *Interrupted*
  means its generation was aborted mid-turn — by a weight update or by a preemption; both hold a
  partial output whose prefix is likely still cached, so resuming them first wastes least.
  A *new* sample of a critical group ranks as (2): it is on the path to the next batch exactly
  like a sample back from its tool, and starting it late would delay its whole group.
* **Classes** (`rollout.core.classes`). Above all of this, waiting samples are served by
  `PriorityClass` (urgent, high, normal, low: the class of the sample's task source, from
  `SampleAdmitted.priority_class`); the five levels and critical-group priority order samples
  only inside a class, so a critical sample never overtakes a higher class. A single-source
  run is all `normal` and behaves exactly as without classes.
* **Starvation** (`starvation_bound_s`, off by default). A sample that has waited for a slot
  longer than the bound moves up one class (decision `Promote`), its wait clock restarting,
  until it is `urgent`; it keeps its first-come place inside the new class.
* **Priority.** A sample is high when its group is critical (`rollout.core.priority`); the shell
  sends `PrioritiesChanged` after each recomputation.
* **Throttle.** Low-priority work starts only while the engine's free KV fraction is above
  `low_priority_kv_watermark`; high-priority work is never throttled.
* **Preemption.** If a high sample waits and every slot it may use is taken while a
  low-priority sample generates there, preempt one low sample per waiting high sample (slots
  already being freed by earlier preemptions are counted first). The victim is the running
  low sample with the fewest tokens generated in its current turn — least wasted work, and its
  turn's KV is the cheapest to rebuild if it is evicted — then the one that started last (under
  continuous batching every running request decodes at the same rate, so the youngest has
  produced the fewest tokens when the engine reports no progress), then the lowest-priority
  group, then the sample id. It resumes later from prompt + partial output. With
  `preemption_payoff` (on by default) a slot is preempted only where it would not free soon
  by itself: the engine's measured natural wait for a slot must exceed one forward step per
  critical generation running there, the stall the victim's extra prefill costs them
  (`rollout.core.slot_turnover`).
  Across classes, a waiting sample may also preempt a running sample of a lower class (the
  lowest class first, non-critical first, then the victim key above) where every slot it may
  use is taken; the high-over-low rule applies only to victims of its own or a lower class.
* **KV residency** (`kv_residency`, `rollout.core.kv_residency`). A generation also needs room
  in its engine's device KV for its context and its turn; an engine that cannot hold the next
  sample in order takes no later one in that pass, a new sample starts only while the live set
  fits device plus host KV (`kv_residency_live_projection`: off where the policy's own live
  gate charges growth), and the first critical sample an engine cannot hold preempts
  low-priority generations there (best victim first) until their KV makes room. A slot is never
  preempted for a critical sample that residency would still not let start.
* **Engines.** Each engine has `max_running_requests` slots. A sample is sticky to the engine
  of its first generation (its KV lives there); a group's new samples prefer the engine of
  its siblings (shared prompt prefix), else the engine with most free slots. With
  `source_affinity`, a new sample then prefers the engines that have run samples of its task
  source (a source-wide system prompt is cached there): a tie-break among the engines it may
  use now (after `critical_spread`), never a wait.
* **Data-parallel spread** (`critical_spread`, DESIGN.md §7). A new critical sample goes only
  to an engine generating fewer critical samples than its share, ceil(unfinished critical
  samples / unpaused engines), while one with a free slot is under it: critical groups spread
  over the engines instead of queueing on the one with most free slots or on their siblings'
  engine.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator

from rollout.core.classes import PriorityClass
from rollout.core.config import SchedulerConfig
from rollout.core.held_samples import HeldTime, HoldReason
from rollout.core.kv_residency import KVResidency
from rollout.core.priority import ActSlotKey, PriorityAssignment, act_slot_key
from rollout.core.scheduler_events import (
    ActFinished,
    ActStarted,
    Decision,
    EngineAdded,
    EngineLoad,
    EnginePaused,
    EngineResumed,
    EngineStatsUpdated,
    GenerationAborted,
    GenerationFinished,
    GenerationProgress,
    Preempt,
    PrioritiesChanged,
    PriorityChanged,
    Promote,
    SampleAdmitted,
    SampleFinished,
    SchedulerEvent,
    StartGeneration,
)
from rollout.core.scheduler_index import SeqQueue
from rollout.core.scheduler_state import (
    ALL_KEYS,
    HIGH_LEVELS,
    KEY_ORDER,
    LEVELS,
    WAITING_STATES,
    EngineSlots,
    Entry,
    KVBlocks,
    QueueKey,
    QueueLevel,
    queue_level,
)
from rollout.core.slot_turnover import SlotTurnover
from rollout.core.types import Sample, SampleState
from rollout.core.victims import VictimSelection
from rollout.errors import SchedulerError

__all__ = [
    "ActFinished",
    "ActStarted",
    "Decision",
    "EngineAdded",
    "EngineLoad",
    "EnginePaused",
    "EngineResumed",
    "EngineStatsUpdated",
    "GenerationAborted",
    "GenerationFinished",
    "GenerationProgress",
    "Preempt",
    "PrioritiesChanged",
    "PriorityChanged",
    "Promote",
    "QueueLevel",
    "RolloutScheduler",
    "SampleAdmitted",
    "SampleFinished",
    "SchedulerEvent",
    "StartGeneration",
    "queue_level",
]


class RolloutScheduler(VictimSelection):
    """Events in, decisions out; see the module docstring for the rules.

    Every per-event cost is independent of the backlog: waiting samples sit in FIFO queues
    per level (and per level and sticky engine), a priority change moves only the samples of
    the groups that changed class, the engines with a free slot are kept as a set, and each
    engine keeps its preemption candidates in a heap (`rollout.core.scheduler_index`).
    """

    def __init__(self, config: SchedulerConfig) -> None:
        self._config = config
        self._engines: dict[str, EngineSlots] = {}
        self._entries: dict[str, Entry] = {}
        # Waiting samples by level, and by level and sticky engine (None: not sticky yet).
        self._levels: dict[QueueKey, SeqQueue[Entry]] = {key: SeqQueue() for key in ALL_KEYS}
        self._sticky: dict[QueueKey, dict[str | None, SeqQueue[Entry]]] = {
            key: {} for key in ALL_KEYS
        }
        self._waiting_keys: set[QueueKey] = set()  # the keys of the non-empty `_levels`
        self._waiting_count = 0  # samples in `_levels`, all keys together
        # Starvation promotion: (deadline, token, sample id) of waiting samples below urgent;
        # a node whose token is not its entry's current `starve_token` is stale (lazy deletion).
        self._starve: list[tuple[float, int, str]] = []
        self._starve_tokens = itertools.count()
        self._now_s = 0.0
        self._classed_live = 0  # live samples not in class `normal` (0: single-class run)
        self._open: set[str] = set()  # engines with a free slot, not paused
        self._open_low: set[str] = set()  # ... whose KV headroom lets low-priority work start
        self._assignment = PriorityAssignment()
        self._group_engine: dict[str, str] = {}
        self._group_entries: dict[str, dict[str, Entry]] = {}  # live samples of each group
        # source_affinity: source -> the engines that have started its samples (and so
        # prefilled its shared prompt; a cache may evict it later: a preference, not a promise)
        self._source_engines: dict[str, set[str]] = {}
        self._critical_live = 0  # live samples of critical groups (the critical work)
        self._victims_total = 0  # preemption candidates on unpaused engines
        self._draining_engines: set[str] = set()  # engines with a preemption in flight
        self._queue_seq = 0
        self._held = HeldTime()  # why ready samples wait here, in sample-seconds (observability)
        self._turnover = SlotTurnover() if config.preemption_payoff else None
        self._residency = (
            KVResidency(
                config.prior_turn_tokens,
                config.prior_peak_context_tokens,
                shared_prefix=config.kv_residency_shared_prefix,
                adaptive_room=config.kv_residency_adaptive_room,
                live_projection=config.kv_residency_live_projection,
            )
            if config.kv_residency
            else None
        )

    # -- queries ---------------------------------------------------------------------------

    def state_of(self, sample_id: str) -> SampleState:
        return self._entry(sample_id).sample.state

    def sample(self, sample_id: str) -> Sample:
        """The sample's state machine (read it; only events change it)."""
        return self._entry(sample_id).sample

    def is_high(self, sample_id: str) -> bool:
        return self._assignment.is_critical(self._entry(sample_id).sample.group_id)

    def class_of(self, sample_id: str) -> PriorityClass:
        """The sample's priority class now (its source's, raised by starvation promotion)."""
        return self._entry(sample_id).klass

    def engine_of(self, sample_id: str) -> str | None:
        """The engine the sample is sticky to, None before its first generation."""
        return self._entry(sample_id).engine

    def running_on(self, engine: str) -> frozenset[str]:
        return frozenset(self._engine(engine).running)

    def waiting_order(self) -> tuple[str, ...]:
        """Waiting samples in the order they would be given slots."""
        return tuple(entry.sample.sample_id for entry in self._waiting_in_order())

    def act_slot_key(self, sample_id: str) -> ActSlotKey:
        """The env pool's act-slot order for a sample in WAIT_ACT (smaller goes first)."""
        entry = self._entry(sample_id)
        group_id = entry.sample.group_id
        return act_slot_key(
            critical=self._assignment.is_critical(group_id),
            group_rank=self._assignment.rank(group_id),
            waiting_since_s=entry.act_waiting_since_s,
            sample_id=sample_id,
        )

    # -- the one entry point ---------------------------------------------------------------

    def handle(self, event: SchedulerEvent) -> tuple[Decision, ...]:
        """Apply `event`; return the decisions to carry out, in order."""
        decisions: list[Decision] = []
        self._now_s = event.now_s
        match event:
            case EngineAdded(engine=name, load=load):
                if name in self._engines:
                    raise SchedulerError(f"engine {name} was already added")
                self._engines[name] = EngineSlots(name, load.max_running_requests, load.kv_headroom)
                self._touch(self._engines[name])
                if self._residency is not None:
                    self._residency.set_capacity(
                        name, load.kv_capacity_tokens, load.host_kv_capacity_tokens
                    )
            case EngineStatsUpdated(engine=name, load=load):
                engine = self._engine(name)
                engine.max_slots = load.max_running_requests
                engine.kv_headroom = load.kv_headroom
                self._touch(engine)
                if self._residency is not None:
                    self._residency.set_capacity(
                        name, load.kv_capacity_tokens, load.host_kv_capacity_tokens
                    )
                    free = round(load.kv_headroom * load.kv_capacity_tokens)
                    self._residency.observe_free(name, free)
            case EnginePaused(engine=name):
                self._set_paused(self._engine(name), paused=True)
            case EngineResumed(engine=name):
                self._set_paused(self._engine(name), paused=False)
            case SampleAdmitted():
                self._on_admitted(event)
            case GenerationProgress(sample_id=sample_id, segment_tokens=tokens):
                entry = self._entry_in(sample_id, SampleState.GEN)
                entry.segment_tokens = max(entry.segment_tokens, tokens)
                self._update_victim(entry)
            case GenerationFinished():
                self._on_generation_finished(event)
            case GenerationAborted():
                self._on_generation_aborted(event)
            case ActStarted(sample_id=sample_id):
                self._entry(sample_id).sample.advance(SampleState.ACT)
            case ActFinished():
                self._on_act_finished(event)
            case SampleFinished(sample_id=sample_id):
                self._finish(self._entry(sample_id))
            case PrioritiesChanged(assignment=assignment):
                decisions.extend(self._on_priorities(assignment))
            case _:
                raise SchedulerError(f"unknown scheduler event {event!r}")
        decisions.extend(self._promote_starved(event.now_s))
        decisions.extend(self._dispatch(event.now_s))
        return tuple(decisions)

    # -- event handlers --------------------------------------------------------------------

    def _on_admitted(self, event: SampleAdmitted) -> None:
        if event.sample_id in self._entries:
            raise SchedulerError(f"sample {event.sample_id} was already admitted")
        entry = Entry(
            Sample(event.sample_id, event.group_id),
            context_tokens=event.context_tokens,
            klass=event.priority_class,
            source=event.source,
        )
        self._entries[event.sample_id] = entry
        if self._residency is not None:  # its prompt is its group's, shared in the prefix cache
            self._residency.set_group(event.sample_id, event.group_id, event.context_tokens)
        if entry.klass is not PriorityClass.NORMAL:
            self._classed_live += 1
        self._group_entries.setdefault(event.group_id, {})[event.sample_id] = entry
        if self._assignment.is_critical(event.group_id):
            self._critical_live += 1
        entry.sample.advance(SampleState.WAIT_GEN)
        self._enqueue(entry)

    def _on_generation_finished(self, event: GenerationFinished) -> None:
        entry = self._entry_in(event.sample_id, SampleState.GEN)
        if self._turnover is not None and entry.engine is not None and event.context_tokens:
            written = event.context_tokens - entry.started_context_tokens
            self._turnover.finished(entry.engine, event.now_s - entry.started_at_s, written)
        self._release_slot(entry)
        entry.turn_tokens_before = 0
        entry.segment_tokens = 0
        self._turn_written(entry, event.context_tokens)
        if event.episode_done:
            self._finish(entry)
            return
        entry.sample.advance(SampleState.WAIT_ACT)
        entry.act_waiting_since_s = event.now_s

    def _on_generation_aborted(self, event: GenerationAborted) -> None:
        entry = self._entry_in(event.sample_id, SampleState.GEN)
        preempted = entry.preempt_pending
        self._release_slot(entry)
        partial = max(event.partial_tokens, entry.segment_tokens)
        entry.turn_tokens_before += partial
        entry.segment_tokens = 0
        entry.context_tokens += event.partial_tokens
        if self._residency is not None:
            self._residency.release(entry.sample.sample_id)  # it must find room to resume
        entry.sample.advance(SampleState.PREEMPTED if preempted else SampleState.INTERRUPTED)
        self._enqueue(entry)

    def _on_act_finished(self, event: ActFinished) -> None:
        entry = self._entry_in(event.sample_id, SampleState.ACT)
        if event.episode_done:
            self._finish(entry)
            return
        if event.context_tokens:
            entry.context_tokens = event.context_tokens
            if self._residency is not None and self._residency.is_resident(event.sample_id):
                assert entry.engine is not None
                self._residency.charge(event.sample_id, entry.engine, entry.context_tokens)
        entry.sample.advance(SampleState.WAIT_GEN)
        self._enqueue(entry)

    def _on_priorities(self, assignment: PriorityAssignment) -> list[Decision]:
        before = self._assignment
        self._assignment = assignment
        changed = [
            entry
            for group_id in before.critical ^ assignment.critical
            for entry in self._group_entries.get(group_id, {}).values()
        ]
        for entry in changed:
            critical = assignment.is_critical(entry.sample.group_id)
            self._critical_live += 1 if critical else -1
            self._update_critical_running(entry)
            if entry.level is not None:
                self._dequeue(entry)
                self._queue(entry, entry.queue_seq)  # same place, the other class's level
            self._update_victim(entry)
            if (
                self._residency is not None
                and not critical
                and entry.sample.state is not SampleState.GEN
            ):
                self._residency.release(entry.sample.sample_id)  # its KV is no longer protected
        changed.sort(key=lambda entry: entry.sample.sample_id)
        return [
            PriorityChanged(entry.sample.sample_id, assignment.is_critical(entry.sample.group_id))
            for entry in changed
        ]

    # -- dispatch --------------------------------------------------------------------------

    def _dispatch(self, now_s: float) -> list[Decision]:
        """Fill free slots in queue order, then preempt for critical samples still waiting.

        With KV residency, an engine whose KV cannot hold the next sample in order takes no
        later one in this pass (a smaller context must not overtake it); the first critical
        sample blocked that way may preempt low-priority generations for room.
        """
        decisions: list[Decision] = []
        kv_blocked = KVBlocks()
        if self._has_free_slot():
            for key in self._keys_waiting():
                if not self._has_free_slot():
                    break
                for entry in self._waiting_at(key, open_only=True):
                    if not self._has_free_slot():
                        break
                    high = self._assignment.is_critical(entry.sample.group_id)
                    if not high and not self._low_work_may_start():
                        break  # the rest of this level is low-priority too (a later class's
                        # high levels may still start)
                    if self._kv_exhausted(kv_blocked) and not (
                        high and self._config.hold_critical_kv
                    ):
                        break  # no engine's KV holds anyone more; only a held sample could start
                    engine = self._pick_engine(entry, high, kv_blocked)
                    if engine is not None:
                        decisions.append(self._start(entry, engine, now_s))
        if self._config.preemption:
            decisions.extend(self._preemptions())
            if self._classed_live:
                decisions.extend(self._class_preemptions())
            decisions.extend(self._kv_preemptions(kv_blocked.engines))
        waiting = self._waiting_count
        self._held.observe(now_s, waiting, self._hold_reason(kv_blocked) if waiting else None)
        return decisions

    def _hold_reason(self, kv_blocked: KVBlocks) -> HoldReason:
        """What stopped this dispatch pass with samples still waiting (`held_samples`)."""
        if not self._open:
            return HoldReason.SLOT
        if kv_blocked.live_full:
            return HoldReason.LIVE_SET
        if kv_blocked.engines:
            return HoldReason.KV_ROOM
        if not self._open_low:
            return HoldReason.LOW_PRIORITY_HEADROOM
        return HoldReason.SLOT  # the free slots are on engines the waiting samples may not use

    def held_sample_s(self, now_s: float) -> dict[str, float]:
        """Sample-seconds ready samples have waited here, by what held them, cumulative up to
        `now_s` (`rollout.core.held_samples`)."""
        return self._held.totals(now_s)

    def _waiting_in_order(
        self, *, high_only: bool = False, open_only: bool = False
    ) -> Iterator[Entry]:
        """Waiting samples level by level, FIFO within a level; samples removed meanwhile are
        skipped. `open_only` may leave out samples sticky to an engine without a free slot
        (dispatch could not start them, and skipping them changes nothing it decides)."""
        for key in self._keys_waiting():
            if high_only and key[1] not in HIGH_LEVELS:
                continue  # a later class may still have high levels
            yield from self._waiting_at(key, open_only=open_only)

    def _keys_waiting(self) -> list[QueueKey]:
        """The (class, level) keys that have waiting samples now, in the order of `ALL_KEYS`.

        Most of the 20 keys are empty (a single-class run uses 5): walking only these spares
        every dispatch a generator per empty level. Callers take the list before starting
        samples, which only ever empties keys (a key emptied meanwhile yields nothing)."""
        return sorted(self._waiting_keys, key=KEY_ORDER.__getitem__)

    def _waiting_at(self, key: QueueKey, *, open_only: bool) -> Iterator[Entry]:
        """The samples waiting at one (class, level), FIFO; see `_waiting_in_order`."""
        if not self._levels[key]:
            return
        if open_only:  # those not sticky yet, and those sticky to an engine with a free slot
            sticky = self._sticky[key]
            streams = (
                [queue for name, queue in sticky.items() if name is None or name in self._open]
                if len(sticky) <= len(self._open)
                else [
                    queue for name in (None, *self._open) if (queue := sticky.get(name)) is not None
                ]
            )
        else:
            streams = [self._levels[key]]
        if len(streams) == 1:
            yield from (entry for _, entry in streams[0].items())
        else:
            yield from (entry for _, entry in heapq.merge(*(q.items() for q in streams)))

    def _kv_would_hold(self, entry: Entry, engine: EngineSlots) -> bool:
        """Whether KV residency would let `entry` start on `engine` once a slot is free there
        (a slot preempted for a sample that still could not start would only churn)."""
        residency = self._residency
        if residency is None:
            return True
        sample_id = entry.sample.sample_id
        if (
            entry.new
            and not residency.is_resident(sample_id)
            and not residency.new_sample_fits(entry.context_tokens)
        ):
            return False
        return residency.fits(sample_id, engine.name, entry.context_tokens)

    def _kv_exhausted(self, kv_blocked: KVBlocks) -> bool:
        """Every engine with a free slot has refused a sample for lack of device KV."""
        if not kv_blocked.engines:
            return False
        return all(name in kv_blocked.engines for name in self._open)

    def _has_free_slot(self) -> bool:
        return bool(self._open)

    def _low_work_may_start(self) -> bool:
        return bool(self._open_low)

    def _touch(self, engine: EngineSlots) -> None:
        """Keep the open-engine sets current after the engine's slots, pause or KV changed."""
        if engine.free_slots and not engine.paused:
            self._open.add(engine.name)
            if self._headroom_allows_low(engine):
                self._open_low.add(engine.name)
            else:
                self._open_low.discard(engine.name)
        else:
            self._open.discard(engine.name)
            self._open_low.discard(engine.name)

    def _pick_engine(self, entry: Entry, high: bool, kv_blocked: KVBlocks) -> EngineSlots | None:
        residency, sample_id = self._residency, entry.sample.sample_id
        resident = residency is not None and residency.is_resident(sample_id)
        usable = [
            engine
            for engine in self._candidate_engines(entry)
            if engine.free_slots
            and (high or self._headroom_allows_low(engine))
            and (resident or engine.name not in kv_blocked.engines)  # held KV: never blocked
        ]
        if (
            residency is not None
            and entry.new
            and usable
            and (kv_blocked.live_full or not residency.new_sample_fits(entry.context_tokens))
        ):
            kv_blocked.live_full = True  # no later new sample may overtake it
            return None
        if residency is not None:
            fitting = []
            for engine in usable:
                if residency.fits(sample_id, engine.name, entry.context_tokens):
                    fitting.append(engine)
                else:
                    kv_blocked.engines.setdefault(engine.name, entry)
            usable = fitting
        if not usable:
            return None
        if high and entry.engine is None and self._config.critical_spread:
            usable = self._under_critical_share(usable)
        preferred = self._group_engine.get(entry.sample.group_id)
        for engine in usable:
            if engine.name == preferred:
                return engine
        if entry.source and self._config.source_affinity:
            holding = self._source_engines.get(entry.source)
            if holding:  # its source's prefix is warm there: a tie-break, never a wait
                usable = [engine for engine in usable if engine.name in holding] or usable
        return max(usable, key=lambda engine: (engine.free_slots, engine.kv_headroom))

    def _under_critical_share(self, usable: list[EngineSlots]) -> list[EngineSlots]:
        """The usable engines below their share of the critical work (all if none is)."""
        engines = sum(1 for engine in self._engines.values() if not engine.paused)
        # The critical work: every unfinished sample of the critical groups (the assignment
        # counts the ones whose env is still starting too), at least those admitted here.
        work = max(self._assignment.critical_samples, self._critical_live)
        share = math.ceil(work / max(1, engines))
        under = [engine for engine in usable if len(engine.critical_running) < share]
        return under or usable

    def _update_critical_running(self, entry: Entry) -> None:
        """Count `entry` among its engine's generating critical samples iff it is one."""
        if entry.engine is None:
            return
        running = self._engines[entry.engine].critical_running
        if entry.sample.state is SampleState.GEN and self._assignment.is_critical(
            entry.sample.group_id
        ):
            running.add(entry.sample.sample_id)
        else:
            running.discard(entry.sample.sample_id)

    def _candidate_engines(self, entry: Entry) -> list[EngineSlots]:
        if entry.engine is not None:
            engine = self._engine(entry.engine)
            return [] if engine.paused else [engine]
        return [engine for engine in self._engines.values() if not engine.paused]

    def _headroom_allows_low(self, engine: EngineSlots) -> bool:
        watermark = self._config.low_priority_kv_watermark
        return watermark == 0.0 or engine.kv_headroom > watermark

    def _start(self, entry: Entry, engine: EngineSlots, now_s: float) -> StartGeneration:
        resume = entry.sample.state in (SampleState.PREEMPTED, SampleState.INTERRUPTED)
        if entry.engine is None and entry.source and self._config.source_affinity:
            self._source_engines.setdefault(entry.source, set()).add(engine.name)
        self._dequeue(entry)
        entry.sample.advance(SampleState.GEN)
        engine.running.add(entry.sample.sample_id)
        self._touch(engine)
        entry.engine = engine.name
        entry.new = False
        entry.started_at_s = now_s
        entry.segment_tokens = 0
        entry.started_context_tokens = entry.context_tokens
        self._update_victim(entry)
        self._update_critical_running(entry)
        if self._residency is not None:
            self._residency.set_live(entry.sample.sample_id, entry.context_tokens)
            self._residency.charge_generation(
                entry.sample.sample_id, engine.name, entry.context_tokens
            )
        self._group_engine.setdefault(entry.sample.group_id, engine.name)
        return StartGeneration(
            entry.sample.sample_id,
            engine.name,
            high=self._assignment.is_critical(entry.sample.group_id),
            resume=resume,
        )

    # -- helpers ---------------------------------------------------------------------------

    def _enqueue(self, entry: Entry) -> None:
        self._queue(entry, self._queue_seq)
        self._queue_seq += 1
        entry.waiting_since_s = self._now_s
        self._arm_starvation(entry)

    def _arm_starvation(self, entry: Entry) -> None:
        """Give the waiting `entry` a promotion deadline (none once urgent or with no bound)."""
        bound = self._config.starvation_bound_s
        if bound is None or entry.klass is PriorityClass.URGENT:
            entry.starve_token = -1
            return
        entry.starve_token = next(self._starve_tokens)
        heapq.heappush(
            self._starve,
            (entry.waiting_since_s + bound, entry.starve_token, entry.sample.sample_id),
        )
        if len(self._starve) > 2 * len(self._entries) + 64:  # drop stale nodes now and then
            self._starve = [node for node in self._starve if self._starve_live(node)]
            heapq.heapify(self._starve)

    def _starve_live(self, node: tuple[float, int, str]) -> bool:
        entry = self._entries.get(node[2])
        return entry is not None and entry.level is not None and entry.starve_token == node[1]

    def _promote_starved(self, now_s: float) -> list[Decision]:
        """Promote, one class each, the samples that have waited longer than the bound."""
        heap = self._starve
        decisions: list[Decision] = []
        while heap and heap[0][0] < now_s:
            node = heapq.heappop(heap)
            if not self._starve_live(node):
                continue
            entry = self._entries[node[2]]
            before = entry.klass
            waited = now_s - entry.waiting_since_s
            self._dequeue(entry)
            entry.klass = before.promoted()
            self._classed_live += (entry.klass is not PriorityClass.NORMAL) - (
                before is not PriorityClass.NORMAL
            )
            self._queue(entry, entry.queue_seq)  # first come within its new class
            entry.waiting_since_s = now_s
            self._arm_starvation(entry)
            decisions.append(Promote(entry.sample.sample_id, before, entry.klass, waited))
        return decisions

    def _queue(self, entry: Entry, seq: int) -> None:
        entry.queue_seq = seq
        level = LEVELS[entry.wait_kind, self._assignment.is_critical(entry.sample.group_id)]
        entry.level = level
        key = (entry.klass, level)
        self._levels[key].add(seq, entry)
        self._waiting_keys.add(key)
        self._waiting_count += 1
        by_engine = self._sticky[key]
        sticky = by_engine.get(entry.engine)
        if sticky is None:
            sticky = by_engine[entry.engine] = SeqQueue()
        sticky.add(seq, entry)

    def _dequeue(self, entry: Entry) -> None:
        level = entry.level
        if level is None:
            return
        entry.level = None  # (its starvation node stays: a re-queue keeps its wait clock)
        key = (entry.klass, level)
        queue = self._levels[key]
        queue.remove(entry.queue_seq)
        self._waiting_count -= 1
        if not queue:
            self._waiting_keys.discard(key)
        by_engine = self._sticky[key]
        sticky = by_engine[entry.engine]
        sticky.remove(entry.queue_seq)
        if not sticky:
            del by_engine[entry.engine]

    def _turn_written(self, entry: Entry, context_tokens: int) -> None:
        """A generation ended with `context_tokens`: a critical sample keeps its device KV
        through the tool call, a low-priority one gives it up (see kv_residency)."""
        if not context_tokens:
            return
        entry.context_tokens = context_tokens
        residency = self._residency
        if residency is None:
            return
        residency.set_live(entry.sample.sample_id, context_tokens)
        residency.turn_written(context_tokens - entry.started_context_tokens)
        critical = self._assignment.is_critical(entry.sample.group_id)
        if critical and self._config.hold_critical_kv and entry.engine is not None:
            residency.charge(entry.sample.sample_id, entry.engine, context_tokens)
        else:
            residency.release(entry.sample.sample_id)

    def _release_slot(self, entry: Entry) -> None:
        if entry.engine is not None:
            engine = self._engine(entry.engine)
            engine.running.discard(entry.sample.sample_id)
            engine.draining.discard(entry.sample.sample_id)
            if not engine.draining:
                self._draining_engines.discard(engine.name)
            before = len(engine.victims)
            engine.victims.discard(entry.sample.sample_id)
            if not engine.paused:
                self._victims_total += len(engine.victims) - before
            engine.critical_running.discard(entry.sample.sample_id)
            self._touch(engine)
        entry.preempt_pending = False

    def _finish(self, entry: Entry) -> None:
        sample_id = entry.sample.sample_id
        if entry.sample.state is SampleState.GEN:
            self._release_slot(entry)
        elif entry.sample.state in WAITING_STATES:
            self._dequeue(entry)
        entry.sample.advance(SampleState.DONE)
        del self._entries[sample_id]
        if entry.klass is not PriorityClass.NORMAL:
            self._classed_live -= 1
        if self._residency is not None:
            self._residency.sample_finished(sample_id)
        group_id = entry.sample.group_id
        if self._assignment.is_critical(group_id):
            self._critical_live -= 1
        siblings = self._group_entries[group_id]
        del siblings[sample_id]
        if not siblings:
            del self._group_entries[group_id]
            self._group_engine.pop(group_id, None)

    def _entry(self, sample_id: str) -> Entry:
        try:
            return self._entries[sample_id]
        except KeyError:
            raise SchedulerError(
                f"sample {sample_id} is unknown to the scheduler (never admitted, or already "
                "finished); report SampleAdmitted first and nothing after it finishes"
            ) from None

    def _entry_in(self, sample_id: str, state: SampleState) -> Entry:
        entry = self._entry(sample_id)
        if entry.sample.state is not state:
            raise SchedulerError(
                f"sample {sample_id} is in state {entry.sample.state}, but the event needs {state}"
            )
        return entry

    def _engine(self, name: str) -> EngineSlots:
        try:
            return self._engines[name]
        except KeyError:
            known = ", ".join(self._engines) or "none"
            raise SchedulerError(
                f"engine {name!r} is unknown (known: {known}); report EngineAdded first"
            ) from None
