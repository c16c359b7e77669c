"""Scheduler health for a mixed rollout (issue 15): pure accumulation of the event/decision stream.

`HealthTracker.observe(event, decisions)` is the hook a dispatcher calls after each report; the
trainer side feeds `batch(...)` and `consumed(...)`. `summary()` is the metrics.json section.
No clock: every time comes from an event's `now_s` or an explicit argument (seconds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rollout.core.classes import PriorityClass
from rollout.core.scheduler_events import (
    ActFinished,
    GenerationAborted,
    Promote,
    SampleAdmitted,
    SampleFinished,
    StartGeneration,
)

__all__ = ["HealthTracker", "percentile"]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile `q` in 0..100 of `values`; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass
class HealthTracker:
    """Accumulates waits per class, starvation, deadline misses, blocked time and rates."""

    starvation_bound_s: float | None = None  # waits above this count as starved; None = off
    _class: dict[str, PriorityClass] = field(default_factory=dict)
    _current: dict[str, PriorityClass] = field(default_factory=dict)  # after promotions
    _ready_since: dict[str, float] = field(default_factory=dict)
    _class_since: dict[str, float] = field(default_factory=dict)  # ready or last promoted
    waits: dict[PriorityClass, list[float]] = field(default_factory=dict)
    promotions: int = 0
    starved_waits: int = 0
    finished: int = 0
    consumed_samples: int = 0
    first_s: float | None = None
    last_s: float = 0.0
    steps: int = 0
    deadline_misses: int = 0
    blocked_s: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    # `StepFill.summary()` of the engines' forwards; None: no engine reports them (n/a)
    step_fill: dict[str, object] | None = None

    def _tick(self, now_s: float) -> None:
        if self.first_s is None:
            self.first_s = now_s
        self.last_s = max(self.last_s, now_s)

    def observe(self, event: object, decisions: Sequence[object] = ()) -> None:
        """Feed one scheduler event and the decisions it produced.

        A wait counts under the class its sample's source gave it, even when starvation
        promotion raised it meanwhile. A wait is *starved* when it outlasted the bound at one
        class below `urgent` (since it became ready or since its last promotion): the
        promotion that should have come did not.
        """
        now_s = float(getattr(event, "now_s", self.last_s))
        self._tick(now_s)
        if isinstance(event, SampleAdmitted):
            self._class[event.sample_id] = event.priority_class
            self._current[event.sample_id] = event.priority_class
            self._ready(event.sample_id, now_s)
        elif isinstance(event, ActFinished) and event.episode_done:
            self.finished += 1  # a finished sample arrives for the trainer
            self._forget(event.sample_id)
        elif isinstance(event, ActFinished | GenerationAborted):
            self._ready(event.sample_id, now_s)
        elif isinstance(event, SampleFinished):
            self._forget(event.sample_id)
        for decision in decisions:
            if isinstance(decision, StartGeneration):
                self._started(decision.sample_id, now_s)
            elif isinstance(decision, Promote):
                self.promotions += 1
                self._current[decision.sample_id] = decision.to_class
                self._class_since[decision.sample_id] = now_s

    def _forget(self, sample_id: str) -> None:
        """A finished sample waits no more: drop its per-sample state (long runs stay small)."""
        for per_sample in (self._class, self._current, self._ready_since, self._class_since):
            per_sample.pop(sample_id, None)

    def _ready(self, sample_id: str, now_s: float) -> None:
        self._ready_since[sample_id] = now_s
        self._class_since[sample_id] = now_s

    def _started(self, sample_id: str, now_s: float) -> None:
        since = self._ready_since.pop(sample_id, None)
        if since is None:
            return
        cls = self._class.get(sample_id, PriorityClass.NORMAL)
        self.waits.setdefault(cls, []).append(max(0.0, now_s - since))
        at_class_s = now_s - self._class_since.pop(sample_id, since)
        current = self._current.get(sample_id, cls)
        bound = self.starvation_bound_s
        if bound is not None and current is not PriorityClass.URGENT and at_class_s > bound:
            self.starved_waits += 1

    def batch(self, requested_s: float, ready_s: float, deadline_s: float | None = None) -> None:
        """One trainer step: blocked time `ready_s - requested_s`; a miss if after `deadline_s`."""
        self.steps += 1
        self.blocked_s.append(max(0.0, ready_s - requested_s))
        if deadline_s is not None and ready_s > deadline_s:
            self.deadline_misses += 1

    def consumed(self, n: int, now_s: float) -> None:
        """The trainer took `n` samples at `now_s`."""
        self._tick(now_s)
        self.consumed_samples += n

    def engine_tokens(self, prompt_tokens: int, cached_prompt_tokens: int) -> None:
        """Set cumulative engine prompt/cached-prompt token counters (for the prefix hit rate)."""
        self.prompt_tokens = prompt_tokens
        self.cached_prompt_tokens = cached_prompt_tokens

    def engine_steps(self, step_fill: dict[str, object] | None) -> None:
        """Set the engines' tokens per step against the step budget (`StepFill.summary()`)."""
        self.step_fill = step_fill

    def summary(self) -> dict[str, object]:
        """The `health` section of metrics.json (times in seconds, rates per second)."""
        span = self.last_s - (self.first_s if self.first_s is not None else self.last_s)
        per_class = {
            cls.value: {
                "count": len(w),
                "mean_wait_s": sum(w) / len(w) if w else 0.0,
                "p99_wait_s": percentile(w, 99.0),
            }
            for cls in PriorityClass
            if (w := self.waits.get(cls, []))
        }
        starved = self.starved_waits if self.starvation_bound_s is not None else self.promotions
        return {
            "steps": self.steps,
            "deadline_misses": self.deadline_misses,
            "deadline_miss_rate": self.deadline_misses / self.steps if self.steps else 0.0,
            "wait_by_class": per_class,
            "starved_requests": starved,
            "promotions": self.promotions,
            "prefix_hit_rate": (
                self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
            ),
            "trainer_blocked_mean_s": (
                sum(self.blocked_s) / len(self.blocked_s) if self.blocked_s else 0.0
            ),
            "trainer_blocked_total_s": sum(self.blocked_s),
            "arrival_rate_per_s": self.finished / span if span > 0 else 0.0,
            "consumption_rate_per_s": self.consumed_samples / span if span > 0 else 0.0,
            "engine_step_fill": self.step_fill,
        }
