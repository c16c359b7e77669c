"""Step events: every phase of every action as a timestamped record, and a small bus to share them.

Phases follow DESIGN.md §2: `env_init`, `pre_gen`, `gen`, `pre_act`, `act`, `reward`, plus
`preempt`, `interrupt`, `offload`, `prefetch`, `truncate` (an instant: the conductor ended the
sample early, e.g. at a step deadline; `data.reason` says why) and `infra_error`. Producers (env
pool, envs, agent loop, engines, KV manager) emit; metrics, the scheduler, the KV manager and
trajectories subscribe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

__all__ = ["EventBus", "EventRecorder", "Phase", "StepEvent", "Subscriber"]


class Phase(StrEnum):
    """The phase a step event reports on."""

    ENV_INIT = "env_init"
    PRE_GEN = "pre_gen"
    GEN = "gen"
    PRE_ACT = "pre_act"
    ACT = "act"
    REWARD = "reward"
    PREEMPT = "preempt"
    INTERRUPT = "interrupt"
    OFFLOAD = "offload"
    PREFETCH = "prefetch"
    TRUNCATE = "truncate"
    INFRA_ERROR = "infra_error"
    LOOP_STALL = "loop_stall"  # the event loop ran nothing for a while (no sample: the run's)


_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StepEvent:
    """One phase of one sample, from `start_s` to `end_s` on the emitter's clock.

    `sample_id`/`group_id` are empty for events that belong to no sample (e.g. a warm container
    being started ahead of demand). `data` carries phase-specific details (exit code, tokens, ...).
    """

    phase: Phase
    start_s: float
    end_s: float
    sample_id: str = ""
    group_id: str = ""
    data: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise ValueError(
                f"{self.phase} event ends before it starts ({self.end_s} < {self.start_s})"
            )

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (used by the events.jsonl writer)."""
        return {
            "phase": str(self.phase),
            "start_s": self.start_s,
            "end_s": self.end_s,
            "sample_id": self.sample_id,
            "group_id": self.group_id,
            "data": dict(self.data),
        }


Subscriber = Callable[[StepEvent], None]


class EventBus:
    """Synchronous publish/subscribe. Subscribers must be quick and must not raise.

    A subscriber that raises is a bug in the subscriber; the bus re-raises it so it is seen at
    once instead of silently losing events.
    """

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it again."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    @property
    def listening(self) -> bool:
        """Whether anyone subscribes: emitters may skip building events nobody reads (a
        benchmark run records none, and builds several per generation otherwise)."""
        return bool(self._subscribers)

    def emit(self, event: StepEvent) -> None:
        for subscriber in tuple(self._subscribers):
            subscriber(event)


class EventRecorder:
    """A subscriber that keeps every event in order; handy for tests and run directories."""

    def __init__(self) -> None:
        self.events: list[StepEvent] = []

    def __call__(self, event: StepEvent) -> None:
        self.events.append(event)

    def of_phase(self, phase: Phase) -> list[StepEvent]:
        return [event for event in self.events if event.phase == phase]
