"""The rollout scheduler's state: queue levels, a sample's entry, an engine's slots.

`RolloutScheduler` (`rollout.core.scheduler`) and its victim selection (`rollout.core.victims`)
share these records; they hold no rules of their own. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from rollout.core.classes import PriorityClass
from rollout.core.scheduler_index import VictimHeap, VictimPrimary
from rollout.core.types import Sample, SampleState
from rollout.errors import SchedulerError

__all__ = [
    "ALL_KEYS",
    "HIGH_LEVELS",
    "KEY_ORDER",
    "LEVELS",
    "WAITING_STATES",
    "EngineSlots",
    "Entry",
    "KVBlocks",
    "QueueKey",
    "QueueLevel",
    "WaitKind",
    "queue_level",
]


class QueueLevel(IntEnum):
    """Where a waiting sample stands; lower values get a generation slot first."""

    INTERRUPTED_HIGH = 1
    BACK_FROM_ENV_HIGH = 2
    INTERRUPTED_LOW = 3
    BACK_FROM_ENV_LOW = 4
    NEW_LOW = 5


def queue_level(state: SampleState, *, new: bool, high: bool) -> QueueLevel:
    """The level of a waiting sample; see the module docstring for the reasons."""
    if state in (SampleState.PREEMPTED, SampleState.INTERRUPTED):
        return QueueLevel.INTERRUPTED_HIGH if high else QueueLevel.INTERRUPTED_LOW
    if state is not SampleState.WAIT_GEN:
        raise SchedulerError(f"a sample in state {state} is not waiting for a generation slot")
    if high:
        return QueueLevel.BACK_FROM_ENV_HIGH
    return QueueLevel.NEW_LOW if new else QueueLevel.BACK_FROM_ENV_LOW


class WaitKind(IntEnum):
    """Why a sample waits; with its group's priority this gives its `QueueLevel`."""

    INTERRUPTED = 0  # preempted or interrupted mid-turn
    BACK_FROM_ENV = 1
    NEW = 2


LEVELS: dict[tuple[WaitKind, bool], QueueLevel] = {
    (WaitKind.INTERRUPTED, True): QueueLevel.INTERRUPTED_HIGH,
    (WaitKind.BACK_FROM_ENV, True): QueueLevel.BACK_FROM_ENV_HIGH,
    (WaitKind.NEW, True): QueueLevel.BACK_FROM_ENV_HIGH,
    (WaitKind.INTERRUPTED, False): QueueLevel.INTERRUPTED_LOW,
    (WaitKind.BACK_FROM_ENV, False): QueueLevel.BACK_FROM_ENV_LOW,
    (WaitKind.NEW, False): QueueLevel.NEW_LOW,
}


@dataclass(slots=True)
class Entry:
    """One live sample as the scheduler tracks it (its queue place, engine, progress)."""

    sample: Sample
    new: bool = True
    engine: str | None = None
    queue_seq: int = 0  # arrival order in the waiting queues (FIFO within a level)
    started_at_s: float = 0.0
    turn_tokens_before: int = 0  # tokens of this turn from segments that were aborted
    segment_tokens: int = 0  # tokens of the running segment, as last reported
    preempt_pending: bool = False
    act_waiting_since_s: float = 0.0
    context_tokens: int = 0  # as last reported: the next generation's prompt
    started_context_tokens: int = 0  # the context when the running generation started
    level: QueueLevel | None = None  # the level it waits at; None while not waiting
    klass: PriorityClass = PriorityClass.NORMAL  # its priority class (promotion raises it)
    waiting_since_s: float = 0.0  # when its current wait (or its last promotion) began
    starve_token: int = -1  # its live node in the starvation heap; -1: none
    source: str = ""  # its task source ('' = none)

    @property
    def turn_tokens(self) -> int:
        return self.turn_tokens_before + self.segment_tokens

    @property
    def victim_primary(self) -> VictimPrimary:
        """The part of the victim key that only its own progress changes."""
        return (self.turn_tokens, -self.started_at_s)

    @property
    def wait_kind(self) -> WaitKind:
        if self.sample.state in (SampleState.PREEMPTED, SampleState.INTERRUPTED):
            return WaitKind.INTERRUPTED
        return WaitKind.NEW if self.new else WaitKind.BACK_FROM_ENV


@dataclass(slots=True)
class EngineSlots:
    """One engine's generation slots, running samples and preemption candidates."""

    name: str
    max_slots: int
    kv_headroom: float
    paused: bool = False
    running: set[str] = field(default_factory=set)
    draining: set[str] = field(default_factory=set)  # preempted, abort not yet returned
    # Running low-priority samples not being preempted: the preemption candidates.
    victims: VictimHeap[Entry] = field(default_factory=VictimHeap)
    critical_running: set[str] = field(default_factory=set)  # generating, critical group

    @property
    def free_slots(self) -> int:
        return max(0, self.max_slots - len(self.running))


@dataclass(slots=True)
class KVBlocks:
    """What KV residency refused in one dispatch pass, so that nothing later overtakes it."""

    engines: dict[str, Entry] = field(default_factory=dict)  # engine -> first it could not hold
    live_full: bool = False  # a new sample found no room in the live set


WAITING_STATES = (SampleState.WAIT_GEN, SampleState.PREEMPTED, SampleState.INTERRUPTED)
HIGH_LEVELS = (QueueLevel.INTERRUPTED_HIGH, QueueLevel.BACK_FROM_ENV_HIGH)
QueueKey = tuple[PriorityClass, QueueLevel]
# Classes by rank, and the five levels inside each: the order waiting samples get slots in.
ALL_KEYS: tuple[QueueKey, ...] = tuple(
    (klass, level)
    for klass in sorted(PriorityClass, key=lambda klass: klass.rank)
    for level in QueueLevel
)
KEY_ORDER: dict[QueueKey, int] = {key: index for index, key in enumerate(ALL_KEYS)}
