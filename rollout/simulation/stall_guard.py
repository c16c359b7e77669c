"""`StallGuard`: fail a simulated run whose engine has requests and computes nothing.

In virtual time a deadlock does not hang: the conductor's time-series task keeps ticking, so
the clock runs on for ever and the run burns CPU without end (growth/32B B=16, seed 4, before
session 20: a request its KV policy would let evict nothing, queued with nothing running; a
bench cell ran for 17 CPU-minutes until it was killed). Each `timeseries.jsonl` record says
how many requests an engine runs and holds waiting, and its busy seconds: an engine that holds
requests (waiting or admitted) and has not computed anything for `stall_after_s` virtual
seconds cannot be waiting for anything but itself (a paused engine resumes after the trainer's
step, a host-to-device copy lands in well under a second, a tool call makes no request wait at
the engine). Pure: fed records, raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rollout.errors import RolloutError

__all__ = ["SimulationStalled", "StallGuard"]


class SimulationStalled(RolloutError):
    """A simulated engine made no progress with requests in it (a deadlock: a bug)."""


class StallGuard:
    """Watches time-series records per engine (see the module docstring)."""

    def __init__(self, stall_after_s: float) -> None:
        if stall_after_s <= 0:
            raise ValueError(f"stall_after_s must be positive, got {stall_after_s}")
        self._stall_after_s = stall_after_s
        # engine -> (t_s, busy_s) when it last held requests with no progress since
        self._still_since: dict[str, tuple[float, float]] = {}

    def record(self, record: Mapping[str, Any]) -> None:
        """Take one record (keys `t_s`, `engine`, `running`, `waiting`, `busy_s`)."""
        name, t_s = str(record["engine"]), float(record["t_s"])
        busy_s = float(record["busy_s"])
        waiting, running = int(record["waiting"]), int(record["running"])
        has_work = waiting + running > 0
        since = self._still_since.get(name)
        if not has_work or since is None or since[1] != busy_s:
            if has_work:
                self._still_since[name] = (t_s, busy_s)
            else:
                self._still_since.pop(name, None)
            return
        if t_s - since[0] >= self._stall_after_s:
            raise SimulationStalled(
                f"engine {name!r} has held {waiting} requests waiting and {running} admitted "
                f"and computed nothing for {t_s - since[0]:,.0f} virtual seconds (since "
                f"t={since[0]:,.1f} s; device KV {record.get('kv_used_tokens')} of "
                f"{record.get('kv_capacity_tokens')} tokens, "
                f"host {record.get('kv_host_used_tokens')} of "
                f"{record.get('kv_host_capacity_tokens')}): nothing can make it progress, a "
                "deadlock in the simulated engine or its KV policy (a bug). Report it with the "
                "config, overrides and seed; `stall_after_s` sets how long a wait counts as one"
            )
