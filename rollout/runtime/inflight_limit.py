"""`AdaptiveInflightLimit`: samples wait, oldest first, while prime-rl's adaptive cap is reached.

The asyncio side of `rollout.core.inflight_control.InflightControl` (the live limit of the
`adaptive_inflight` peer). A sample is *in flight* from `enter` to `leave`, its whole trajectory
(tool calls included), as a prime-rl episode holds its dispatcher permit. The conductor calls
`poll` every `poll_interval_s` with every engine's stats; a finished sample grows the cap, a poll
may trim or cut it. When the controller asks to cancel in-flight episodes, the limit picks the
youngest groups (a group is as old as its oldest in-flight member) until enough in-flight samples
are covered, releases their places at once (as prime-rl's `drop_group` releases permits) and
asks the conductor to restart those groups from scratch (`LiveLimitContext.shed_groups`); the
restarted samples queue again behind the waiting ones. Refills are burst-capped as prime-rl's
dispatcher does: at most max(group size, cap ÷ 10) admissions per poll interval (prime-rl's
admission window is 5 s, as its poll interval; here the window opens at each poll).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rollout.core.inflight_control import CapChange, EngineLoadSample, InflightControl
from rollout.core.types import group_id_of
from rollout.engines.base import EngineStats
from rollout.runtime.fifo_gate import FifoGate

__all__ = ["AdaptiveInflightLimit", "InflightCounts", "engine_load_sample"]


def engine_load_sample(engine: str, stats: EngineStats) -> EngineLoadSample:
    """One engine's poll as the controller reads it: device-KV use is what running requests
    hold (evictable cache counts as free; an idle engine holds none), preemptions are the
    engine's cumulative KV retractions (`extra["retractions"]`; 0 if it reports none)."""
    used = 0
    if stats.running_requests or stats.waiting_requests:
        used = max(0, stats.kv_used_tokens - int(stats.extra.get("kv_evictable_tokens", 0)))
    usage = used / stats.kv_capacity_tokens if stats.kv_capacity_tokens > 0 else 0.0
    return EngineLoadSample(
        engine,
        kv_usage=usage,
        running=stats.running_requests,
        waiting=stats.waiting_requests,
        preemptions=int(stats.extra.get("retractions", 0)),
    )


@dataclass(slots=True)
class InflightCounts:
    """What the limit did over a run (cap changes by kind, samples cancelled)."""

    grows: int = 0
    trims: int = 0
    cuts: int = 0
    cancelled_samples: int = 0
    cancelled_groups: int = 0


class AdaptiveInflightLimit(FifoGate):
    """FIFO gate on the number of in-flight samples under an adaptive cap (module docstring)."""

    def __init__(
        self,
        control: InflightControl,
        *,
        now_s: Callable[[], float],
        shed_groups: Callable[[Sequence[str]], None],
        min_burst: int,
    ) -> None:
        super().__init__()
        self._control = control
        self._now_s = now_s
        self._shed_groups = shed_groups
        self._min_burst = max(1, min_burst)
        self._live: dict[str, float] = {}  # sample -> when it went in flight
        self._generated: set[str] = set()
        self._shed: set[str] = set()  # cancelled here: their places are already free
        self._admitted_in_window = 0
        self.counts = InflightCounts()

    @property
    def poll_interval_s(self) -> float:
        return self._control.config.poll_interval_s

    @property
    def cap(self) -> int:
        return self._control.limit

    @property
    def inflight(self) -> int:
        return len(self._live)

    def update(self, sample_id: str, context_tokens: int) -> None:
        """The sample generated (its context is now `context_tokens`)."""
        if sample_id in self._live:
            self._generated.add(sample_id)

    def leave(self, sample_id: str) -> None:
        """The sample finished (or gave up); a sample this limit cancelled left already."""
        if sample_id in self._shed:
            self._shed.discard(sample_id)
            return
        if self._live.pop(sample_id, None) is None:
            return
        generated = sample_id in self._generated
        self._generated.discard(sample_id)
        change = self._control.episode_finished(
            len(self._live), generated=generated, now_s=self._now_s()
        )
        self._apply(change)
        self._wake()

    def poll(self, engines: Mapping[str, EngineStats], now_s: float) -> None:
        """Every engine's stats at one poll: the controller may trim or cut the cap; a new
        admission window opens."""
        self._admitted_in_window = 0
        samples = [engine_load_sample(name, stats) for name, stats in engines.items()]
        self._apply(self._control.observe(samples, inflight=len(self._live), now_s=now_s))
        self._wake()

    def _fits(self, sample_id: str) -> bool:
        fraction = self._control.config.refill_burst_fraction
        burst = max(self._min_burst, int(self._control.limit * fraction))
        return len(self._live) < self._control.limit and self._admitted_in_window < burst

    def _admit(self, sample_id: str) -> None:
        self._live[sample_id] = self._now_s()
        self._admitted_in_window += 1

    def _apply(self, change: CapChange | None) -> None:
        if change is None:
            return
        if change.kind == "grow":
            self.counts.grows += 1
        elif change.kind == "trim":
            self.counts.trims += 1
        else:
            self.counts.cuts += 1
        if change.cancel > 0:
            self._cancel_youngest(change.cancel)

    def _cancel_youngest(self, count: int) -> None:
        """Cancel about `count` in-flight samples: whole groups, youngest first (a group is as
        old as its oldest in-flight member), as prime-rl's `cancel_inflight` does."""
        started: dict[str, float] = {}
        members: dict[str, list[str]] = {}
        for sample_id, since in self._live.items():
            group = group_id_of(sample_id)
            started[group] = min(since, started.get(group, since))
            members.setdefault(group, []).append(sample_id)
        chosen: list[str] = []
        cancelled = 0
        for group in sorted(started, key=started.__getitem__, reverse=True):
            if cancelled >= count:
                break
            chosen.append(group)
            for sample_id in members[group]:
                del self._live[sample_id]
                self._generated.discard(sample_id)
                self._shed.add(sample_id)
                cancelled += 1
        self.counts.cancelled_samples += cancelled
        self.counts.cancelled_groups += len(chosen)
        self._shed_groups(chosen)
