"""`PriorityKeeper`: keeps the critical-group assignment current as samples progress.

It feeds the pure pieces — the `LengthPredictor` (remaining work of each live sample, from
its progress and its finished siblings) and the `CriticalGroupTracker` (closure cost per
group, the D cheapest critical) — from the shell's turn-boundary events, and teaches the
predictor with every finished sample. With priority off (the FCFS baselines) it predicts
nothing and every group stays low priority. Pure: no clock, no I/O.
"""

from __future__ import annotations

from rollout.core.config import AdmissionConfig, PriorityConfig
from rollout.core.predictors.base import FinishedSample, LengthPredictor, SampleContext
from rollout.core.priority import CriticalGroupTracker, PriorityAssignment, remaining_work_s
from rollout.core.types import Group, SampleProgress, Trajectory

__all__ = ["PriorityKeeper"]


class PriorityKeeper:
    """See the module docstring. `enabled=False` keeps every group low priority."""

    def __init__(
        self,
        admission: AdmissionConfig,
        priority: PriorityConfig,
        predictor: LengthPredictor,
        *,
        enabled: bool,
    ) -> None:
        self._priority = priority
        self._predictor = predictor
        self._enabled = enabled
        self._tracker = CriticalGroupTracker(admission, priority)
        self._group_size: dict[str, int] = {}
        self._siblings: dict[str, list[tuple[int, int]]] = {}  # group -> finished (turns, tokens)
        self._contexts: dict[str, list[SampleContext]] = {}
        self._current = PriorityAssignment()
        self._predicted_turns: dict[str, float] = {}  # sample -> remaining turns, last predicted

    def add_group(self, group: Group) -> None:
        """A group was admitted: predict its samples from the prior and their siblings."""
        self._tracker.add_group(group)
        self._group_size[group.group_id] = group.size
        self._siblings[group.group_id] = []
        for sample_id in group.sample_ids():
            self.update(SampleProgress(sample_id, group.group_id, 0, 0, 0, 0), record=False)

    def update(self, progress: SampleProgress, *, record: bool = True) -> None:
        """A turn boundary: predict the sample's remaining work again."""
        if not self._enabled:
            return
        siblings = self._siblings.get(progress.group_id, [])
        context = SampleContext(
            sample_id=progress.sample_id,
            group_id=progress.group_id,
            turns_done=progress.turns_done,
            gen_tokens=progress.gen_tokens,
            context_tokens=progress.context_tokens,
            obs_tokens=progress.obs_tokens,
            group_size=self._group_size.get(progress.group_id, 1),
            sibling_turns=tuple(turns for turns, _ in siblings),
            sibling_gen_tokens=tuple(tokens for _, tokens in siblings),
        )
        if record:
            self._contexts.setdefault(progress.sample_id, []).append(context)
        work = self._predictor.predict(context)
        self._predicted_turns[progress.sample_id] = work.turns
        self._tracker.set_remaining(progress.sample_id, remaining_work_s(work, self._priority))

    def predicted_turns(self, sample_id: str) -> float | None:
        """The sample's remaining turns as last predicted (None: not predicted)."""
        return self._predicted_turns.get(sample_id)

    def sample_finished(self, trajectory: Trajectory) -> None:
        """The sample's final attempt ended; trainable samples teach the predictor."""
        self._tracker.sample_finished(trajectory.sample_id)
        self._predicted_turns.pop(trajectory.sample_id, None)
        contexts = self._contexts.pop(trajectory.sample_id, [])
        if not (self._enabled and trajectory.is_trainable):
            return
        turns, tokens = len(trajectory.turns), trajectory.num_generated_tokens
        self._siblings.setdefault(trajectory.group_id, []).append((turns, tokens))
        self._predictor.observe(
            FinishedSample(
                sample_id=trajectory.sample_id,
                group_id=trajectory.group_id,
                total_turns=turns,
                total_gen_tokens=tokens,
                contexts=tuple(contexts),
            )
        )

    def sample_restarted(self, trajectory: Trajectory) -> None:
        """A finished sample will run again from scratch (`retired_requests: cancel`): it is
        predicted from the prior and its siblings again."""
        self._tracker.sample_restarted(trajectory.sample_id)
        self.update(
            SampleProgress(trajectory.sample_id, trajectory.group_id, 0, 0, 0, 0), record=False
        )

    def group_ready(self, group_id: str) -> None:
        self._tracker.group_ready(group_id)

    def group_consumed(self, group_id: str) -> None:
        self._tracker.group_consumed(group_id)
        self._group_size.pop(group_id, None)
        self._siblings.pop(group_id, None)

    @property
    def current(self) -> PriorityAssignment:
        """The assignment `refresh` last returned (empty before the first)."""
        return self._current

    def is_critical(self, group_id: str) -> bool:
        return self._current.is_critical(group_id)

    def refresh(self, training_step: int) -> PriorityAssignment | None:
        """Recompute; returns the new assignment if the critical set or the ranks changed."""
        if not self._enabled:
            return None
        assignment = self._tracker.assignment(training_step)
        before = self._current
        if (assignment.critical, assignment.overdue, assignment.ranks) == (
            before.critical,
            before.overdue,
            before.ranks,
        ):
            return None
        self._current = assignment
        return assignment
