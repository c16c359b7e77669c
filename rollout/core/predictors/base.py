"""The `LengthPredictor` protocol and the context a prediction is made from.

A predictor answers "how much work does this unfinished sample still have?" as `RemainingWork`:
expected remaining *turns* and remaining *generated tokens*. The two are kept apart because the
long tail of agent trajectories comes mostly from the number of turns (perf-model.md §7); the
priority layer turns them into one seconds-equivalent with `rollout.core.priority.remaining_work_s`.

Predictions are made from a `SampleContext` taken at a turn boundary (what the sample has done
so far and what its finished siblings did). When a sample finishes, the shell hands the contexts
it predicted from, with the truth, to `observe` as a `FinishedSample`; online predictors learn
from that. Nothing here reads a clock or does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "FinishedSample",
    "LengthPredictor",
    "RemainingWork",
    "SampleContext",
    "labelled_examples",
]


@dataclass(frozen=True, slots=True)
class RemainingWork:
    """Predicted (or true) remaining work of one sample."""

    turns: float
    gen_tokens: float

    def __post_init__(self) -> None:
        if self.turns < 0 or self.gen_tokens < 0:
            raise ValueError(f"remaining work cannot be negative: {self}")


@dataclass(frozen=True, slots=True)
class SampleContext:
    """What is known about a live sample at a turn boundary.

    `sibling_turns`/`sibling_gen_tokens` are the totals of the group's samples that have already
    finished (same order in both), so they are empty early on.
    """

    sample_id: str
    group_id: str
    turns_done: int
    gen_tokens: int
    context_tokens: int
    obs_tokens: int
    group_size: int = 1
    sibling_turns: tuple[int, ...] = ()
    sibling_gen_tokens: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if len(self.sibling_turns) != len(self.sibling_gen_tokens):
            raise ValueError(
                f"context of {self.sample_id}: {len(self.sibling_turns)} sibling turn totals but "
                f"{len(self.sibling_gen_tokens)} sibling token totals; give one of each per sibling"
            )

    @property
    def mean_gen_tokens_per_turn(self) -> float | None:
        """This sample's own generation rate so far, or None before its first turn."""
        return self.gen_tokens / self.turns_done if self.turns_done else None

    @property
    def mean_obs_tokens_per_turn(self) -> float | None:
        return self.obs_tokens / self.turns_done if self.turns_done else None


@dataclass(frozen=True, slots=True)
class FinishedSample:
    """A finished sample's truth, with the contexts predictions were made from along the way."""

    sample_id: str
    group_id: str
    total_turns: int
    total_gen_tokens: int
    contexts: tuple[SampleContext, ...] = ()


def labelled_examples(finished: FinishedSample) -> list[tuple[SampleContext, RemainingWork]]:
    """Pair every recorded context of `finished` with the work that really remained after it."""
    return [
        (
            context,
            RemainingWork(
                turns=max(0, finished.total_turns - context.turns_done),
                gen_tokens=max(0, finished.total_gen_tokens - context.gen_tokens),
            ),
        )
        for context in finished.contexts
    ]


@runtime_checkable
class LengthPredictor(Protocol):
    """Predicts the remaining work of live samples; may learn from finished ones."""

    def predict(self, context: SampleContext) -> RemainingWork:
        """Expected remaining work after `context`. Must be cheap: called at every turn boundary."""
        ...

    def observe(self, finished: FinishedSample) -> None:
        """Learn from a finished sample (a no-op for predictors that do not learn)."""
        ...
