"""Retired requests under `retired_requests: cancel`: every trained group has one policy version.

`RetiredGroups` is the half of `Conductor` that, at a weight update, re-runs from scratch every
group not complete yet that holds tokens of the version just retired (GRPO compares a group's
samples, so they must share one version): generating samples are cancelled and start again,
finished ones leave the sink and run again. Mixed into `Conductor`; under the default
`retired_requests: resume` none of it runs (partial rollout: per-token versions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

from rollout.core.admission import AdmissionController
from rollout.core.priority_keeper import PriorityKeeper
from rollout.core.types import Group, Trajectory, make_sample_id
from rollout.runtime.config import ConductorConfig
from rollout.trajectories.sink import TrajectorySink

__all__ = ["RetiredGroups", "generated_versions"]


class RetiredGroups:
    """`retired_requests: cancel` (see the module docstring)."""

    # The conductor state it reads and keeps (set by `Conductor.__init__`).
    _config: ConductorConfig
    _sink: TrajectorySink
    _admission: AdmissionController
    _keeper: PriorityKeeper
    _completed_s: dict[str, float]
    _done_samples: dict[str, int]
    _spent: set[str]  # samples with tokens of the current version
    _runs: dict[str, asyncio.Task[Trajectory]]  # each live sample's run
    _stale: set[str]  # runs that ended just before their group was retired
    stats: Any

    async def _attempts(self, group: Group, index: int) -> Trajectory:
        raise NotImplementedError

    async def _run_sample(self, group: Group, index: int) -> None:
        raise NotImplementedError

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        raise NotImplementedError

    async def _on_policy_attempts(self, group: Group, index: int) -> Trajectory:
        """`_attempts`; under `retired_requests: cancel`, started again from scratch each time a
        weight update retires its group, until its tokens have one policy version."""
        if self._config.retired_requests == "resume":
            return await self._attempts(group, index)
        sample_id = make_sample_id(group.group_id, group.attempt, index)
        while True:
            self._spent.discard(sample_id)
            run = asyncio.ensure_future(self._attempts(group, index))
            self._runs[sample_id] = run
            try:
                trajectory = await run
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not run.cancelled() or (current is not None and current.cancelling()):
                    raise  # the conductor is closing, not a retired-version restart
                self.stats.restarted_samples += 1
                continue
            finally:
                self._runs.pop(sample_id, None)
                self._spent.discard(sample_id)
            stale = sample_id in self._stale  # ended just before its group was retired
            self._stale.discard(sample_id)
            if not stale and len(set(generated_versions(trajectory))) <= 1:
                return trajectory
            self.stats.restarted_samples += 1  # an update slipped past the cancel: run again

    def _retire_groups(self) -> None:
        """`retired_requests: cancel` at a weight update: every group not complete yet that
        holds tokens of the version just retired is re-run as a whole (one version per group,
        as GRPO compares a group's samples): its generating samples are cancelled and start
        again, its finished ones leave the sink and run again. Groups that generated nothing
        yet, and complete groups (written once, one version each), are left alone."""
        spent, self._spent = self._spent, set()
        for group in self._admission.live_groups:
            if group.group_id in self._completed_s:
                continue
            members = group.sample_ids()
            pending = self._sink.pending_members(group.group_id)
            finished = [t for t in pending if generated_versions(t)]
            if not finished and spent.isdisjoint(members):
                continue
            self.stats.restarted_groups += 1
            for sample_id in members:
                run = self._runs.get(sample_id)
                if run is None:
                    continue  # (not started: nothing to retire)
                if run.done():
                    self._stale.add(sample_id)  # ended, not in the sink yet: run it again
                elif sample_id in spent:
                    run.cancel()  # starts again in _on_policy_attempts
            self._rerun(group, [t.sample_id for t in finished])

    def _fits_group(self, group: Group, trajectory: Trajectory) -> bool:
        """Whether `trajectory` may join its group's finished samples (cancel mode): their
        generated tokens share one policy version. If not, the samples of older versions are
        run again (this one included: False)."""
        versions = {
            t.sample_id: set(generated_versions(t))
            for t in self._sink.pending_members(group.group_id)
        }
        versions[trajectory.sample_id] = set(generated_versions(trajectory))
        seen = {version for each in versions.values() for version in each}
        if len(seen) <= 1:
            return True
        newest = max(seen)
        old = [s for s, v in versions.items() if v and v != {newest}]
        self.stats.restarted_groups += 1
        self._rerun(group, [s for s in old if s != trajectory.sample_id])
        if trajectory.sample_id in old:
            self.stats.restarted_samples += 1
            return False
        return True

    def _rerun(self, group: Group, sample_ids: Sequence[str]) -> None:
        """Take `sample_ids` of `group` back from the sink and run each again from scratch."""
        for trajectory in self._sink.discard(group.group_id, sample_ids):
            self.stats.restarted_samples += 1
            self._done_samples[group.group_id] -= 1
            self._keeper.sample_restarted(trajectory)
            self._spawn(self._run_sample(group, trajectory.sample_index), trajectory.sample_id)


def generated_versions(trajectory: Trajectory) -> list[int]:
    """The policy versions of the tokens the model generated (loss-mask 1)."""
    return [v for v, m in zip(trajectory.versions, trajectory.loss_mask, strict=True) if m]
