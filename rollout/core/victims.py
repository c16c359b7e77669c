"""Whom the rollout scheduler preempts: the victim-selection half of `RolloutScheduler`.

The rules (DESIGN.md §2-3, and the scheduler's module docstring): a waiting critical sample
whose every usable slot is taken preempts one running low-priority generation (the one with the
least work in its turn, then the youngest, then the lowest-priority group, then the id); across
priority classes a waiting sample may preempt a lower class; KV residency preempts low-priority
generations until a critical sample's KV fits. `VictimSelection` is mixed into
`RolloutScheduler` and reads its state (engines, entries, the priority assignment, the open
and draining engines); it decides, never does I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from rollout.core.classes import PriorityClass
from rollout.core.kv_residency import KVResidency
from rollout.core.priority import PriorityAssignment
from rollout.core.scheduler_events import Decision, Preempt
from rollout.core.scheduler_state import ALL_KEYS, EngineSlots, Entry, QueueKey
from rollout.core.slot_turnover import SlotTurnover
from rollout.core.types import SampleState

__all__ = ["VictimSelection"]


class VictimSelection:
    """The preemption rules of `RolloutScheduler` (see the module docstring)."""

    # The scheduler state the rules read (set by `RolloutScheduler.__init__`).
    _engines: dict[str, EngineSlots]
    _entries: dict[str, Entry]
    _assignment: PriorityAssignment
    _open: set[str]
    _draining_engines: set[str]
    _victims_total: int
    _classed_live: int
    _residency: KVResidency | None
    _turnover: SlotTurnover | None

    def _waiting_in_order(self, *, high_only: bool = False) -> Iterator[Entry]:
        raise NotImplementedError

    def _waiting_at(self, key: QueueKey, *, open_only: bool) -> Iterator[Entry]:
        raise NotImplementedError

    def _candidate_engines(self, entry: Entry) -> list[EngineSlots]:
        raise NotImplementedError

    def _kv_would_hold(self, entry: Entry, engine: EngineSlots) -> bool:
        raise NotImplementedError

    def _touch(self, engine: EngineSlots) -> None:
        raise NotImplementedError

    def _preemptions(self) -> list[Decision]:
        """One victim (or one slot already being freed) per waiting critical sample."""
        waiting = self._waiting_in_order(high_only=True)
        first = next(waiting, None)
        if first is None:
            return []  # no critical sample waits: skip ranking every running sample
        # What is being freed and who may be preempted, counted once a sample needs a slot.
        freeing: dict[str, int] | None = None
        freeing_left = victims_left = 0
        decisions: list[Decision] = []
        for entry in itertools.chain((first,), waiting):
            if freeing is not None and not victims_left and not freeing_left:
                break
            sticky = entry.engine
            if (sticky in self._open) if sticky is not None else bool(self._open):
                continue  # a slot it may use is free: it waits for KV or live-set room
            if freeing is None:
                engines = self._engines
                freeing = {
                    name: len(engines[name].draining)
                    for name in self._draining_engines
                    if not engines[name].paused
                }
                freeing_left = sum(freeing.values())
                victims_left = self._victims_total
                if not victims_left and not freeing_left:
                    break
            if sticky is not None:
                engine = self._engines[sticky]
                if not freeing.get(sticky, 0) and (engine.paused or not engine.victims):
                    continue  # its one engine has neither a slot being freed nor a victim
            candidates = self._candidate_engines(entry)
            candidates = [engine for engine in candidates if self._kv_would_hold(entry, engine)]
            targets = [engine.name for engine in candidates]  # a slot it could not use: none
            claimed = next((name for name in targets if freeing.get(name, 0) > 0), None)
            if claimed is not None:
                freeing[claimed] -= 1
                freeing_left -= 1
                continue
            candidates = [engine for engine in candidates if self._preemption_pays(engine)]
            victim = (
                self._best_victim_at_or_below(candidates, entry.klass)
                if self._classed_live
                else self._best_victim(candidates)
            )
            if victim is None:
                continue
            victims_left -= 1
            why = f"waits and every slot on engine {victim.engine} is taken"
            decisions.append(self._preempt(victim, entry, why))
        return decisions

    def _preemption_pays(self, engine: EngineSlots) -> bool:
        """Whether a slot preemption on `engine` gains more than it costs
        (`rollout.core.slot_turnover`; always, without `preemption_payoff`)."""
        turnover = self._turnover
        return turnover is None or turnover.preemption_pays(
            engine.name, len(engine.running), len(engine.critical_running)
        )

    def _class_preemptions(self) -> list[Decision]:
        """A waiting sample may preempt a running one of a lower class (higher rank) where
        every slot it may use is taken; one victim (or one slot being freed) per waiting sample,
        in waiting order. Runs only while some live sample is not `normal`. Costs the running
        samples of the full engines (bounded by their slots) plus the waiting samples of the
        classes above the lowest running one."""
        worst: dict[str, int] = {}  # full unpaused engine -> lowest running class's rank
        freeing: dict[str, int] = {}
        for engine in self._engines.values():
            if engine.paused or engine.name in self._open:
                continue
            freeing[engine.name] = len(engine.draining)
            ranks = [
                self._entries[sid].klass.rank
                for sid in engine.running
                if sid not in engine.draining
            ]
            if ranks:
                worst[engine.name] = max(ranks)
        if not worst:
            return []
        floor = max(worst.values())
        decisions: list[Decision] = []
        for key in ALL_KEYS:
            if key[0].rank >= floor:
                break  # no running sample is below this class
            for entry in self._waiting_at(key, open_only=False):
                sticky = entry.engine
                if (sticky in self._open) if sticky is not None else bool(self._open):
                    continue  # a slot it may use is free
                engines = [
                    engine
                    for engine in self._candidate_engines(entry)
                    if self._kv_would_hold(entry, engine)
                ]
                claimed = next((e.name for e in engines if freeing.get(e.name, 0) > 0), None)
                if claimed is not None:
                    freeing[claimed] -= 1
                    continue
                rank = entry.klass.rank
                victims = [
                    victim
                    for engine in engines
                    if worst.get(engine.name, -1) > rank
                    for sid in engine.running
                    if sid not in engine.draining
                    and (victim := self._entries[sid]).klass.rank > rank
                ]
                if not victims:
                    continue
                victim = min(  # lowest class, then not critical, then the usual victim key
                    victims,
                    key=lambda v: (
                        -v.klass.rank,
                        self._assignment.is_critical(v.sample.group_id),
                        self._victim_key(v),
                    ),
                )
                why = (
                    f"({entry.klass}) waits and every slot on engine {victim.engine} is taken; "
                    f"{victim.sample.sample_id} is of the lower class {victim.klass}"
                )
                decisions.append(self._preempt(victim, entry, why))
        return decisions

    def _preempt(self, victim: Entry, waiting: Entry, why: str) -> Preempt:
        """Mark `victim` as being preempted for `waiting` (its slot counts as freeing)."""
        assert victim.engine is not None
        victim.preempt_pending = True
        self._engines[victim.engine].draining.add(victim.sample.sample_id)
        self._draining_engines.add(victim.engine)
        self._update_victim(victim)
        return Preempt(
            victim.sample.sample_id,
            victim.engine,
            reason=(
                f"critical sample {waiting.sample.sample_id} {why}; {victim.sample.sample_id} "
                f"is the low-priority generation with the least work in its turn "
                f"({victim.turn_tokens} tokens)"
            ),
            for_sample_id=waiting.sample.sample_id,
        )

    def _kv_preemptions(self, kv_blocked: dict[str, Entry]) -> list[Decision]:
        """Make device KV room for the first critical sample each engine could not hold.

        Victims are that engine's running low-priority generations, best victim first, until
        the room they free (with what earlier preemptions are already freeing) covers its need.
        """
        residency = self._residency
        critical = {
            name: waiting
            for name, waiting in kv_blocked.items()
            if self._assignment.is_critical(waiting.sample.group_id)
        }
        if residency is None or not critical:
            return []  # skip ranking every running sample
        decisions: list[Decision] = []
        for name, waiting in sorted(critical.items()):
            engine = self._engines[name]
            room = residency.room(name) or 0
            room += sum(residency.held(sample_id) for sample_id in engine.draining)
            need = residency.need(waiting.sample.sample_id, name, waiting.context_tokens)
            while room < need and not engine.paused:
                victim = self._best_victim([engine])  # each is preempted, so the next is new
                if victim is None:
                    break
                room += residency.held(victim.sample.sample_id)
                why = f"needs {need} tokens of device KV on engine {name}"
                decisions.append(self._preempt(victim, waiting, why))
        return decisions

    def _best_victim(self, engines: Iterable[EngineSlots]) -> Entry | None:
        """The best victim (smallest `_victim_key`) among the engines' running low-priority
        samples not already being preempted; None if there is none."""
        heads = [
            (primary, engine)
            for engine in engines
            if (primary := engine.victims.min_primary()) is not None
        ]
        if not heads:
            return None
        smallest = min(primary for primary, _ in heads)
        tied = [
            entry
            for primary, engine in heads
            if primary == smallest
            for entry in engine.victims.tied(primary)
        ]
        return min(tied, key=self._victim_key)

    def _best_victim_at_or_below(
        self, engines: Iterable[EngineSlots], klass: PriorityClass
    ) -> Entry | None:
        """Like `_best_victim`, but only from `klass` or a lower class (lowest class first): a
        critical sample never preempts a higher class. Scans the engines' running samples
        (bounded by their slots); used only while some live sample is not `normal`."""
        victims = [
            victim
            for engine in engines
            for sid in engine.running
            if sid not in engine.draining
            and (victim := self._entries[sid]).klass.rank >= klass.rank
            and not victim.preempt_pending
            and not self._assignment.is_critical(victim.sample.group_id)
        ]
        if not victims:
            return None
        return min(victims, key=lambda v: (-v.klass.rank, self._victim_key(v)))

    def _update_victim(self, entry: Entry) -> None:
        """Keep `entry`'s place among its engine's preemption candidates current."""
        if entry.engine is None:
            return
        engine = self._engines[entry.engine]
        victims, before = engine.victims, len(engine.victims)
        if (
            entry.sample.state is SampleState.GEN
            and not entry.preempt_pending
            and not self._assignment.is_critical(entry.sample.group_id)
        ):
            victims.add(entry.sample.sample_id, entry.victim_primary, entry)
        else:
            victims.discard(entry.sample.sample_id)
        if not engine.paused:
            self._victims_total += len(victims) - before

    def _set_paused(self, engine: EngineSlots, *, paused: bool) -> None:
        if engine.paused != paused:  # its candidates leave or rejoin the count
            self._victims_total += -len(engine.victims) if paused else len(engine.victims)
        engine.paused = paused
        self._touch(engine)

    def _victim_key(self, entry: Entry) -> tuple[int, float, int, str]:
        """Fewest tokens this turn, then latest start, then lowest-priority group, then id."""
        return (
            entry.turn_tokens,
            -entry.started_at_s,
            -self._assignment.rank(entry.sample.group_id),
            entry.sample.sample_id,
        )
