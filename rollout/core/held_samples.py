"""Why samples ready to generate wait at the conductor, and for how long.

A sample whose next generation could start waits in the scheduler's queue while no engine it
may use takes it. Whether that wait is the engines' capacity or one of the conductor's own
limits is what a user tuning a run needs to know (issue 27: at 30 % of ours' decode steps on
the 32B-like drift cell the engine had nothing queued while KV residency held samples back,
because the pool was full of running contexts; a wait for KV room with free KV would be a
setting to change). The scheduler names, after every dispatch pass, what stopped it:

* `slot`: no engine the sample may use has a free generation slot (a sample keeps to the
  engine that holds its KV);
* `kv_room`: KV residency: the first in line does not fit the device KV of an engine with a
  free slot (`scheduler.kv_residency`);
* `live_set`: a new sample would take the live set past device and host KV (the residency's
  live projection);
* `low_priority_headroom`: the free slots are on engines whose KV headroom is kept for critical
  work (`scheduler.low_priority_kv_watermark`).

`HeldTime` integrates the number of waiting samples over time, each interval under the reason
of the pass that began it: cumulative sample-seconds by reason (a difference over a span ÷ the
span: the mean number of samples held for it then). Pure accounting: the caller passes the
clock's readings.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["HeldTime", "HoldReason"]


class HoldReason(StrEnum):
    """What stopped a dispatch pass with samples still waiting (see the module docstring)."""

    SLOT = "slot"
    KV_ROOM = "kv_room"
    LIVE_SET = "live_set"
    LOW_PRIORITY_HEADROOM = "low_priority_headroom"


class HeldTime:
    """Sample-seconds held at the conductor, by reason (see the module docstring)."""

    def __init__(self) -> None:
        self._since_s: float | None = None  # when the current state began
        self._waiting = 0
        self._reason: HoldReason | None = None
        self._held_s: dict[HoldReason, float] = {}

    def observe(self, now_s: float, waiting: int, reason: HoldReason | None) -> None:
        """After a dispatch pass at `now_s`: `waiting` samples wait, held for `reason` (None
        when none waits). The state before it counts up to `now_s`."""
        if waiting <= 0 or reason is None:
            waiting, reason = 0, None
        if waiting == self._waiting and reason is self._reason and self._since_s is not None:
            return  # the same state goes on (most passes): nothing to count yet
        self._integrate(now_s)
        self._waiting, self._reason = waiting, reason

    def totals(self, now_s: float) -> dict[str, float]:
        """Sample-seconds held per reason since the first observation, counted up to `now_s`
        (cumulative: a reader takes differences); reasons with none are left out."""
        self._integrate(now_s)
        return {str(reason): seconds for reason, seconds in self._held_s.items() if seconds > 0}

    def _integrate(self, now_s: float) -> None:
        since = self._since_s
        if since is not None and self._reason is not None and now_s > since:
            self._held_s[self._reason] = self._held_s.get(self._reason, 0.0) + self._waiting * (
                now_s - since
            )
        if since is None or now_s > since:
            self._since_s = now_s
