"""Per-step wall-clock deadlines: what to truncate, what to cancel, when to hand over fewer groups.

Pure decisions, no I/O; the conductor reads the state of the step's groups, asks, and carries
out the answer. A step's deadline is `requested_s + step_budget_s` (from when the trainer asked
for the batch). Three moments matter::

    requested_s ──────────── truncate_at_s = deadline - margin ──── deadline_s
                 (no change)      │ truncate the stragglers of the      │ `proceed`: hand over
                                  │ groups closest to completion,       │ the ready groups, even
                                  │ cancel generations that can no      │ fewer than B (`short`)
                                  │ longer help this step               │ `wait`: keep waiting

*Truncate* ends a live sample at its current turn (its partial output kept, reward so far).
*Cancel* aborts a generation that belongs to a group this step will not take, so the engine
spends its batch on the stragglers; the sample resumes later from its partial output (a
cancelled request is never lost); while a chosen group still has samples to start (which may
need the engine before the next plan truncates them), it is *held*: it resumes when the step
is handed over or the hold lifts, not at once on a free slot (`DeadlinePlan.hold`).

Each generation request issued while a step is waiting under a budget carries a deadline of
its own (`request_deadline`): the moment past which it can no longer help the step, which the
engine enforces by aborting it there (partial output kept, as for any abort).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "DeadlinePhase",
    "DeadlinePlan",
    "GroupProgress",
    "StepDeadline",
    "deadline_phase",
    "plan_truncation",
    "proceeds_short",
    "request_deadline",
]


class DeadlinePhase(StrEnum):
    """Where `now` stands against a step's deadline."""

    BEFORE = "before"  # nothing to do yet
    TRUNCATE = "truncate"  # within the margin: truncate stragglers, cancel what cannot help
    PAST = "past"  # the deadline has passed: a `proceed` step hands over what it has


def deadline_phase(now_s: float, deadline_s: float, margin_s: float) -> DeadlinePhase:
    """The phase at `now_s` of a step due at `deadline_s` that truncates `margin_s` earlier."""
    if now_s >= deadline_s:
        return DeadlinePhase.PAST
    if now_s >= deadline_s - margin_s:
        return DeadlinePhase.TRUNCATE
    return DeadlinePhase.BEFORE


def request_deadline(now_s: float, deadline_s: float | None, margin_s: float) -> float | None:
    """The absolute deadline of a generation request issued at `now_s` while a step due at
    `deadline_s` (None: no step waits under a budget) truncates `margin_s` earlier.

    Before the truncation point: the truncation point (there the step truncates or cancels
    whatever still generates, so a longer request cannot help it). Within the truncation
    window: the step's deadline (a late start must not run past it). Past the deadline: none
    (a `wait` step now needs every token of its missing groups; cutting them helps nothing).
    """
    if deadline_s is None or now_s >= deadline_s:
        return None
    truncate_at_s = deadline_s - margin_s
    return truncate_at_s if now_s < truncate_at_s else deadline_s


@dataclass(frozen=True, slots=True)
class GroupProgress:
    """One admitted group that is not complete yet, as the conductor sees it now.

    `running` are its samples with a live agent loop (truncatable), `generating` those of them
    with a generation in flight (cancellable); the rest of its `size` samples are `done` or not
    started (waiting for a slot or between attempts: neither truncatable nor cancellable).
    `order` is its admission order (older first breaks ties).
    """

    group_id: str
    size: int
    done: int
    running: tuple[str, ...] = ()
    generating: frozenset[str] = frozenset()
    order: int = 0

    @property
    def unstarted(self) -> int:
        """Samples that are neither done nor running."""
        return max(0, self.size - self.done - len(self.running))


@dataclass(frozen=True, slots=True)
class DeadlinePlan:
    """What to do now: the sample ids to truncate and the generations to cancel, by sample id.

    `chosen` are the groups whose stragglers are truncated (the ones that complete the batch).
    `hold`: a chosen group has samples not started yet; they may generate before the next
    plan truncates them, so cancelled generations wait instead of competing with them.
    """

    truncate: tuple[str, ...] = ()
    cancel: tuple[str, ...] = ()
    chosen: tuple[str, ...] = ()
    hold: bool = False


def plan_truncation(groups: Sequence[GroupProgress], needed: int) -> DeadlinePlan:
    """Truncate the running samples of the `needed` groups closest to completion; cancel the
    generations of every other incomplete group.

    Closest to completion = fewest unstarted samples (truncation cannot finish those), then
    fewest running ones (fewer trajectories cut short), then the oldest. `needed <= 0` (the
    batch is already there) plans nothing.
    """
    if needed <= 0:
        return DeadlinePlan()
    ranked = sorted(groups, key=lambda g: (g.unstarted, len(g.running), g.order, g.group_id))
    chosen, others = ranked[:needed], ranked[needed:]
    return DeadlinePlan(
        truncate=tuple(sample for group in chosen for sample in group.running),
        cancel=tuple(sorted(sample for group in others for sample in group.generating)),
        chosen=tuple(group.group_id for group in chosen),
        hold=any(group.unstarted for group in chosen),
    )


def proceeds_short(phase: DeadlinePhase, ready: int, wanted: int, *, proceed: bool) -> bool:
    """Whether a step hands over `ready < wanted` groups now: only a `proceed` step, only past
    its deadline, and only with at least one group (an empty batch trains nothing: it waits)."""
    return proceed and phase is DeadlinePhase.PAST and 0 < ready < wanted


@dataclass(frozen=True, slots=True)
class StepDeadline:
    """How a step with a budget went (its `steps.jsonl` line keeps `to_dict()`).

    `hit`: the step reached its truncation point (or deadline) before it had B groups;
    `truncated` / `cancelled`: samples it truncated, generations it cancelled; `groups` of
    `wanted` (B) groups handed over; `short` when it proceeded with fewer than B.
    """

    budget_s: float
    hit: bool = False
    truncated: int = 0
    cancelled: int = 0
    groups: int = 0
    wanted: int = 0
    short: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_s": self.budget_s,
            "hit": self.hit,
            "truncated": self.truncated,
            "cancelled": self.cancelled,
            "groups": self.groups,
            "wanted": self.wanted,
            "short": self.short,
        }
