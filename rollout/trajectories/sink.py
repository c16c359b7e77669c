"""The trajectory sink: assembles finished samples into whole groups, persists them, queues them.

A group is complete when all K of its samples have arrived (rewarded, or ended by an
infrastructure error — such samples travel with their group and are excluded later by the
trainer helpers, so the group still completes). A complete group is written to every writer in
one piece and queued for the trainer; `take_batch` hands out B groups in completion order
(among the groups a consume window allows, when the caller gives one).
Synchronous and I/O-light; an async batch stream for in-process trainers wraps `take_batch`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Sequence

from rollout.core.types import Trajectory
from rollout.errors import SinkError
from rollout.trajectories.writers import TrajectoryWriter

__all__ = ["TrajectorySink"]


class TrajectorySink:
    """Collects trajectories per group; see the module docstring.

    Groups are `group_size` samples unless `expect` named another size for them (a mixed run's
    sources each have their own group size).
    """

    def __init__(self, group_size: int, writers: Sequence[TrajectoryWriter] = ()) -> None:
        if group_size < 1:
            raise SinkError(f"group_size must be >= 1, got {group_size}")
        self._group_size = group_size
        self._writers = tuple(writers)
        self._pending: dict[str, dict[str, Trajectory]] = {}
        self._sizes: dict[str, int] = {}  # groups whose size is not group_size
        self._ready: deque[tuple[Trajectory, ...]] = deque()
        self._closed = False

    @property
    def ready_groups(self) -> int:
        """Complete groups waiting for the trainer."""
        return len(self._ready)

    def ready_among(self, eligible: Collection[str] | None) -> int:
        """Complete groups waiting whose id is in `eligible` (None: every one)."""
        if eligible is None:
            return len(self._ready)
        return sum(1 for group in self._ready if group[0].group_id in eligible)

    @property
    def pending_groups(self) -> int:
        """Groups with some but not all samples in."""
        return len(self._pending)

    def expect(self, group_id: str, size: int) -> None:
        """Group `group_id` completes with `size` samples (call before its first `add`)."""
        if size < 1:
            raise SinkError(f"group {group_id}: size must be >= 1, got {size}")
        if size == self._group_size:
            self._sizes.pop(group_id, None)
        else:
            self._sizes[group_id] = size

    def add(self, trajectory: Trajectory) -> tuple[Trajectory, ...] | None:
        """Add a finished sample; returns its group (by sample index) if this completed it."""
        if self._closed:
            raise SinkError("the sink is closed")
        if trajectory.reward is None and trajectory.infra_error is None:
            raise SinkError(
                f"trajectory {trajectory.sample_id} has no reward and no infra_error; reward it "
                "(DONE → REWARDED) before it enters the sink"
            )
        members = self._pending.setdefault(trajectory.group_id, {})
        if trajectory.sample_id in members:
            raise SinkError(f"trajectory {trajectory.sample_id} was added twice")
        members[trajectory.sample_id] = trajectory
        if len(members) < self._sizes.get(trajectory.group_id, self._group_size):
            return None
        del self._pending[trajectory.group_id]
        self._sizes.pop(trajectory.group_id, None)
        group = tuple(sorted(members.values(), key=lambda t: (t.sample_index, t.sample_id)))
        for writer in self._writers:
            writer.write_group(group)
        self._ready.append(group)
        return group

    def pending_members(self, group_id: str) -> tuple[Trajectory, ...]:
        """The samples of an incomplete group that have arrived so far (by sample id)."""
        members = self._pending.get(group_id, {})
        return tuple(members[sample_id] for sample_id in sorted(members))

    def discard(self, group_id: str, sample_ids: Iterable[str]) -> tuple[Trajectory, ...]:
        """Take back arrived samples of an incomplete group (they will be run again and added
        anew: `retired_requests: cancel`); returns those it held, by sample id. A complete
        group is never touched: it was written and queued once."""
        members = self._pending.get(group_id)
        if members is None:
            return ()
        dropped = tuple(members.pop(s) for s in sorted(set(sample_ids)) if s in members)
        if not members:
            del self._pending[group_id]
        return dropped

    def take_batch(
        self, groups: int, eligible: Collection[str] | None = None
    ) -> list[tuple[Trajectory, ...]] | None:
        """The `groups` complete groups that completed first (among `eligible` ids, if given;
        the others stay queued in order), or None (and nothing taken) if fewer are ready."""
        if groups < 1:
            raise SinkError(f"a batch needs at least one group, asked for {groups}")
        if eligible is None:
            if len(self._ready) < groups:
                return None
            return [self._ready.popleft() for _ in range(groups)]
        chosen = [group for group in self._ready if group[0].group_id in eligible][:groups]
        if len(chosen) < groups:
            return None
        taken = {id(group) for group in chosen}
        self._ready = deque(group for group in self._ready if id(group) not in taken)
        return chosen

    def close(self) -> None:
        """Close every writer (flushing buffered Parquet groups); idempotent."""
        if self._closed:
            return
        self._closed = True
        for writer in self._writers:
            writer.close()
