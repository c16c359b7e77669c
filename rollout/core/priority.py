"""Critical groups: which unfinished groups are high priority, from closure cost and staleness.

At time t the trainer still needs ``D(t) = B − |ready groups|`` groups. Picking the D groups that
finish soonest is NP-hard (it contains PARTITION), so each group gets a *closure cost*: the
largest predicted remaining work over its unfinished samples (a group is done when its slowest
sample is). The D cheapest groups are *critical* (high priority), all others low. A group whose
staleness deadline is near is critical regardless, and takes its share of D first: the batch
must contain it anyway, so it needs fewer other groups (no starvation of expensive groups).

Recompute on every turn boundary (`CriticalGroupTracker.assignment`). The same order gives each
group a *rank* (0 = most urgent), which breaks ties among preemption victims and orders the env
pool's act slots (`act_slot_key`). Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from rollout.core.config import AdmissionConfig, PriorityConfig
from rollout.core.predictors.base import RemainingWork
from rollout.core.types import Group
from rollout.errors import SchedulerError

__all__ = [
    "ActSlotKey",
    "CriticalGroupTracker",
    "GroupStatus",
    "OrderRanks",
    "PriorityAssignment",
    "act_slot_key",
    "assign_priorities",
    "closure_cost_s",
    "remaining_work_s",
]

ActSlotKey = tuple[int, int, float, str]
"""Sort key of a sample waiting for an act slot: smaller runs first."""


def remaining_work_s(work: RemainingWork, config: PriorityConfig) -> float:
    """One seconds-equivalent for a prediction: turns × per-turn overhead + tokens × decode time."""
    return work.turns * config.seconds_per_turn + work.gen_tokens * config.seconds_per_gen_token


def closure_cost_s(remaining_work_s: Iterable[float]) -> float:
    """Closure cost: the largest remaining work over a group's unfinished samples (0 if none)."""
    return max(remaining_work_s, default=0.0)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """An unfinished group as the priority rule sees it.

    `remaining_work_s` holds one entry per sample that has not finished (empty once all have
    finished and only the reward is pending); `admission_order` breaks ties (older first).
    """

    group_id: str
    admitted_step: int
    admission_order: int
    remaining_work_s: tuple[float, ...] = ()
    closure_cost_s: float = field(init=False)  # computed once: every recomputation sorts by it

    def __post_init__(self) -> None:
        object.__setattr__(self, "closure_cost_s", closure_cost_s(self.remaining_work_s))


_EMPTY_RANKS: Mapping[str, int] = MappingProxyType({})


class OrderRanks(Mapping[str, int]):
    """Group id -> rank, read from the groups in rank order; the index is built on first
    lookup. The tracker makes one per recomputation (every turn boundary), and most are
    replaced before anyone looks a rank up (only preemption ties and act slots do)."""

    __slots__ = ("_index", "_order")

    def __init__(self, order: Sequence[str]) -> None:
        self._order = tuple(order)
        self._index: dict[str, int] | None = None

    def _ranks(self) -> dict[str, int]:
        if self._index is None:
            self._index = dict(zip(self._order, range(len(self._order)), strict=True))
        return self._index

    def __getitem__(self, group_id: str) -> int:
        return self._ranks()[group_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._ranks()

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, OrderRanks):
            return self._order == other._order  # same order, same ranks
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash(self._order)


_EMPTY_COSTS: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PriorityAssignment:
    """The outcome of one recomputation."""

    critical: frozenset[str] = frozenset()
    overdue: frozenset[str] = frozenset()
    ranks: Mapping[str, int] = field(default_factory=lambda: _EMPTY_RANKS)
    closure_costs_s: Mapping[str, float] = field(default_factory=lambda: _EMPTY_COSTS)
    demand: int = 0
    critical_samples: int = 0  # unfinished samples of the critical groups: the critical work

    def is_critical(self, group_id: str) -> bool:
        return group_id in self.critical

    def rank(self, group_id: str) -> int:
        """0 = most urgent; groups the assignment does not know rank after all known ones."""
        return self.ranks.get(group_id, len(self.ranks))


def assign_priorities(
    groups: Sequence[GroupStatus],
    *,
    ready_groups: int,
    training_step: int,
    admission: AdmissionConfig,
    priority: PriorityConfig,
) -> PriorityAssignment:
    """Choose the critical groups among `groups` (the unfinished ones) and rank all of them.

    Order: overdue groups (oldest first), then the rest by closure cost (cheapest first), ties
    by admission order then id; with `window_slack_groups` set, the oldest D + slack of the
    rest come before the others. Critical: every overdue group, plus the first others until
    ``D = B − ready_groups`` groups are critical.
    """
    demand = max(0, admission.groups_per_step - ready_groups)
    costs = {group.group_id: group.closure_cost_s for group in groups}

    def is_overdue(group: GroupStatus) -> bool:
        deadline = group.admitted_step + admission.async_factor - 1
        return training_step >= deadline - priority.deadline_margin_steps

    overdue = sorted(
        (group for group in groups if is_overdue(group)),
        key=lambda group: (group.admission_order, group.group_id),
    )
    others = _window_first(
        sorted(
            (group for group in groups if not is_overdue(group)),
            key=lambda group: (group.admission_order, group.group_id),
        ),
        window=None
        if priority.window_slack_groups is None
        else max(0, demand - len(overdue)) + priority.window_slack_groups,
        costs=costs,
    )
    ordered = [*overdue, *others]
    cheapest = others[: max(0, demand - len(overdue))]
    critical = frozenset(group.group_id for group in (*overdue, *cheapest))
    return PriorityAssignment(
        critical=critical,
        overdue=frozenset(group.group_id for group in overdue),
        ranks=MappingProxyType({group.group_id: rank for rank, group in enumerate(ordered)}),
        closure_costs_s=MappingProxyType(costs),
        demand=demand,
        critical_samples=sum(
            len(group.remaining_work_s) for group in groups if group.group_id in critical
        ),
    )


def _window_first(
    oldest_first: list[GroupStatus], *, window: int | None, costs: Mapping[str, float]
) -> list[GroupStatus]:
    """The groups by closure cost (cheapest first), the oldest `window` of them before the rest
    (`window` None: all compete on cost alone); ties by admission order."""

    def by_cost(group: GroupStatus) -> tuple[float, int, str]:
        return (costs[group.group_id], group.admission_order, group.group_id)

    if window is None:
        return sorted(oldest_first, key=by_cost)
    return [
        *sorted(oldest_first[:window], key=by_cost),
        *sorted(oldest_first[window:], key=by_cost),
    ]


def act_slot_key(
    *, critical: bool, group_rank: int, waiting_since_s: float, sample_id: str
) -> ActSlotKey:
    """The env pool's act-slot order: critical first, then group rank, then first come."""
    return (0 if critical else 1, group_rank, waiting_since_s, sample_id)


class CriticalGroupTracker:
    """Keeps the per-group inputs of `assign_priorities` up to date from turn-boundary events.

    The shell calls `add_group` on admission, `set_remaining` with each new prediction (at
    admission and every turn boundary), `sample_finished`, `group_ready` when all samples are
    rewarded and `group_consumed` when the trainer took it; then `assignment(step)`.
    A sample without a prediction yet counts as infinitely expensive.

    Called on every turn boundary, so it keeps each group's closure cost current and returns
    the previous assignment when no input of `assign_priorities` changed (most predictions
    move a sample that is not its group's slowest, which changes no cost). A recomputation
    gives what `assign_priorities` would, without sorting: the unfinished groups are kept in
    cost order and in admission-step order as they change.
    """

    def __init__(self, admission: AdmissionConfig, priority: PriorityConfig) -> None:
        self._admission = admission
        self._priority = priority
        self._groups: dict[str, Group] = {}
        self._order: dict[str, int] = {}
        self._remaining: dict[str, dict[str, float]] = {}  # group -> unfinished sample -> work_s
        self._sample_group: dict[str, str] = {}
        self._ready: set[str] = set()
        self._next_order = 0
        # Unfinished groups. Each status's largest entry (its closure cost) is current; the
        # other entries are refreshed with it (they do not enter the assignment).
        self._statuses: dict[str, GroupStatus] = {}
        self._costs: dict[str, float] = {}  # of the unfinished groups, in admission order
        self._by_cost: list[tuple[float, int, str]] = []  # (cost, admission order, group id)
        self._by_cost_ids: list[str] = []  # the same groups' ids, in the same order
        self._by_step: list[tuple[int, int, str]] = []  # (admitted step, order, group id)
        self._last: tuple[int, PriorityAssignment] | None = None  # (training step, assignment)
        # A cost moved without changing the order: `_last` holds but its costs are old.
        self._costs_stale = False

    @property
    def ready_groups(self) -> int:
        """Groups ready for the trainer and not consumed yet."""
        return len(self._ready)

    def add_group(self, group: Group) -> None:
        if group.group_id in self._groups:
            raise SchedulerError(f"group {group.group_id} is already tracked; add it once")
        self._groups[group.group_id] = group
        self._order[group.group_id] = self._next_order
        self._next_order += 1
        self._remaining[group.group_id] = {}
        for sample_id in group.sample_ids():
            self._sample_group[sample_id] = group.group_id
            self._remaining[group.group_id][sample_id] = math.inf
        self._restate(group.group_id)

    def set_remaining(self, sample_id: str, work_s: float) -> None:
        group_id = self._group_of(sample_id)
        remaining = self._remaining[group_id]
        if sample_id not in remaining:
            raise SchedulerError(f"sample {sample_id} already finished; it has no remaining work")
        before = remaining[sample_id]
        remaining[sample_id] = work_s
        status = self._statuses.get(group_id)
        cost = math.inf if status is None else status.closure_cost_s
        if work_s > cost or (before == cost and work_s != before):
            self._restate(group_id)  # the group's slowest sample moved: its cost did

    def sample_finished(self, sample_id: str) -> None:
        group_id = self._group_of(sample_id)
        if self._remaining[group_id].pop(sample_id, None) is not None:
            self._restate(group_id)

    def sample_restarted(self, sample_id: str) -> None:
        """A finished sample runs again (its group was retired by a weight update): it has
        unknown work again."""
        group_id = self._group_of(sample_id)
        remaining = self._remaining[group_id]
        if sample_id not in remaining:
            remaining[sample_id] = math.inf
            self._restate(group_id)

    def group_ready(self, group_id: str) -> None:
        self._require(group_id)
        self._ready.add(group_id)
        self._drop_status(group_id)
        self._last = None

    def group_consumed(self, group_id: str) -> None:
        """The trainer took the group (or it was discarded): forget it."""
        group = self._require(group_id)
        self._ready.discard(group_id)
        for sample_id in group.sample_ids():
            self._sample_group.pop(sample_id, None)
        self._drop_status(group_id)
        del self._groups[group_id], self._order[group_id], self._remaining[group_id]
        self._last = None

    def assignment(self, training_step: int) -> PriorityAssignment:
        """The critical groups among the unfinished (not ready) groups, recomputed only when
        a closure cost, the set of groups, the ready count or the training step changed."""
        if self._last is not None and self._last[0] == training_step:
            if self._costs_stale:  # same order, so the same critical set and ranks
                self._costs_stale = False
                last = self._last[1]
                fresh = replace(
                    last,
                    closure_costs_s=MappingProxyType(dict(self._costs)),
                    critical_samples=sum(map(len, map(self._remaining.__getitem__, last.critical))),
                )
                self._last = (training_step, fresh)
            return self._last[1]
        admission, priority = self._admission, self._priority
        demand = max(0, admission.groups_per_step - len(self._ready))
        # Overdue: training_step >= admitted_step + async_factor - 1 - margin (assign_priorities).
        last_overdue_step = (
            training_step - admission.async_factor + 1 + priority.deadline_margin_steps
        )
        overdue_keys = self._by_step[: bisect_right(self._by_step, (last_overdue_step, math.inf))]
        overdue = [key[2] for key in sorted(overdue_keys, key=lambda key: (key[1], key[2]))]
        overdue_set = frozenset(overdue)
        if priority.window_slack_groups is None:
            window: set[str] = set()
            front: list[str] = []
        else:
            size = max(0, demand - len(overdue)) + priority.window_slack_groups
            oldest = [gid for gid in self._costs if gid not in overdue_set][:size]
            window = set(oldest)
            front = [key[2] for key in self._by_cost if key[2] in window]
        if overdue_set or window:
            skip = overdue_set | window
            rest = [key[2] for key in self._by_cost if key[2] not in skip]
        else:
            rest = self._by_cost_ids  # read only: OrderRanks copies it
        others = [*front, *rest] if front else rest
        ordered = [*overdue, *others] if overdue else others
        cheapest = others[: max(0, demand - len(overdue))]
        critical = frozenset((*overdue, *cheapest))
        assignment = PriorityAssignment(
            critical=critical,
            overdue=overdue_set,
            ranks=OrderRanks(ordered),
            closure_costs_s=MappingProxyType(dict(self._costs)),
            demand=demand,
            critical_samples=sum(map(len, map(self._remaining.__getitem__, critical))),
        )
        self._last = (training_step, assignment)
        self._costs_stale = False
        return assignment

    def _restate(self, group_id: str) -> None:
        """Rebuild the status of an unfinished group after its closure cost changed.

        When the group keeps its place in cost order (most turn boundaries), the last
        assignment still holds but for its costs and sample counts."""
        if group_id in self._ready:
            self._last = None
            return
        before = self._statuses.get(group_id)
        old_place = (
            None
            if before is None
            else bisect_left(
                self._by_cost, (before.closure_cost_s, before.admission_order, group_id)
            )
        )
        self._drop_status(group_id, forget_cost=False)
        status = self._statuses[group_id] = GroupStatus(
            group_id=group_id,
            admitted_step=self._groups[group_id].admitted_step,
            admission_order=self._order[group_id],
            remaining_work_s=tuple(self._remaining[group_id].values()),
        )
        self._costs[group_id] = status.closure_cost_s
        key = (status.closure_cost_s, status.admission_order, group_id)
        place = bisect_left(self._by_cost, key)
        self._by_cost.insert(place, key)
        self._by_cost_ids.insert(place, group_id)
        insort(self._by_step, (status.admitted_step, status.admission_order, group_id))
        if place == old_place:
            self._costs_stale = True
        else:
            self._last = None

    def _drop_status(self, group_id: str, *, forget_cost: bool = True) -> None:
        """Take the group out of the candidates' indexes (`forget_cost=False`: it is restated
        at once, keeping its place in admission order)."""
        status = self._statuses.pop(group_id, None)
        if status is None:
            return
        if forget_cost:
            del self._costs[group_id]
        order = status.admission_order
        place = bisect_left(self._by_cost, (status.closure_cost_s, order, group_id))
        del self._by_cost[place], self._by_cost_ids[place]
        del self._by_step[bisect_left(self._by_step, (status.admitted_step, order, group_id))]

    def _group_of(self, sample_id: str) -> str:
        try:
            return self._sample_group[sample_id]
        except KeyError:
            raise SchedulerError(
                f"sample {sample_id} belongs to no tracked group; add_group() its group first"
            ) from None

    def _require(self, group_id: str) -> Group:
        try:
            return self._groups[group_id]
        except KeyError:
            raise SchedulerError(f"group {group_id} is not tracked") from None
