"""Shed groups: what a polled live limit may ask the conductor to do (`PolledLiveLimit`).

`ShedGroups` is the half of `Conductor` that polls such a limit with every engine's stats and,
when the limit sheds live groups (prime-rl's overload cancel, the `adaptive_inflight` peer),
restarts each from scratch: its running samples are cancelled and start again (they pass the
limit again, behind the samples already waiting), its finished ones leave the sink and run
again. A group's prompt and its place in admission stay, so no prompt is lost or run twice.
Mixed into `Conductor`; with any other live limit none of it runs (no extra task per sample).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from foundation.clock import Clock
from rollout.core.admission import AdmissionController
from rollout.core.types import Group, Trajectory, make_sample_id
from rollout.engines.base import Engine
from rollout.runtime.policy import PolledLiveLimit
from rollout.trajectories.sink import TrajectorySink

__all__ = ["ShedGroups"]


class ShedGroups:
    """Polling a `PolledLiveLimit` and restarting the groups it sheds (module docstring)."""

    # The conductor state it reads and keeps (set by `Conductor.__init__`).
    _admission: AdmissionController
    _sink: TrajectorySink
    _engines: Mapping[str, Engine]
    _clock: Clock
    _completed_s: dict[str, float]
    _shed_runs: dict[str, asyncio.Task[Trajectory]] | None  # None: the limit never sheds
    stats: Any

    async def _on_policy_attempts(self, group: Group, index: int) -> Trajectory:
        raise NotImplementedError

    def _rerun(self, group: Group, sample_ids: Sequence[str]) -> None:
        raise NotImplementedError

    def _note(self, kind: str, **fields: Any) -> None:
        raise NotImplementedError

    async def _sheddable_attempts(self, group: Group, index: int) -> Trajectory | None:
        """The sample's run; None when its group was shed meanwhile (run it again)."""
        runs = self._shed_runs
        if runs is None:
            return await self._on_policy_attempts(group, index)
        sample_id = make_sample_id(group.group_id, group.attempt, index)
        run = asyncio.ensure_future(self._on_policy_attempts(group, index))
        runs[sample_id] = run
        try:
            return await run
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not run.cancelled() or (current is not None and current.cancelling()):
                raise  # the conductor is closing, not a shed group
            return None
        finally:
            runs.pop(sample_id, None)

    def _shed_groups(self, group_ids: Sequence[str]) -> None:
        """Restart each live group of `group_ids` from scratch (module docstring)."""
        runs = self._shed_runs
        if runs is None:
            raise RuntimeError("this conductor's live limit does not shed groups")
        live = {group.group_id: group for group in self._admission.live_groups}
        for group_id in group_ids:
            group = live.get(group_id)
            if group is None or group_id in self._completed_s:
                continue  # consumed, or complete already: nothing left to shed
            cancelled = 0
            for sample_id in group.sample_ids():
                run = runs.get(sample_id)
                if run is not None and not run.done():
                    run.cancel()
                    cancelled += 1
            finished = [t.sample_id for t in self._sink.pending_members(group_id)]
            self.stats.shed_groups += 1
            self.stats.shed_samples += cancelled + len(finished)
            self._note(
                "shed",
                group_id=group_id,
                running=cancelled,
                finished=len(finished),
                reason="the live limit cut in-flight episodes: the group runs again from scratch",
            )
            self._rerun(group, finished)

    def _group_size_of(self, group_id: str) -> int:
        """The size of live group `group_id`."""
        for group in self._admission.live_groups:
            if group.group_id == group_id:
                return group.size
        raise KeyError(f"group {group_id} is not live")

    async def _poll_live_limit(self, limit: PolledLiveLimit) -> None:
        """Every `poll_interval_s`, every engine's stats to the limit (on the conductor clock)."""
        while True:
            stats = {name: engine.stats() for name, engine in self._engines.items()}
            limit.poll(stats, self._clock.now())
            await asyncio.sleep(limit.poll_interval_s)
