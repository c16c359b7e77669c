"""`ContextGrowth`: what a live sample's context will cost the KV pool over the rest of its life.

An agent's context grows every turn (its reply and the tool's output are appended): on SWE-agent
traces it ends 5-8x larger than its first prompt. A live-sample gate that charges each sample
its context *today* admits a wave of young samples whose contexts then outgrow the pool
together, and the engine thrashes (simulated on an empirical trace with 6x growth: 17x the
recomputation of a trajectory-level baseline). Charging the context a sample is expected to hold
*over its remaining life* keeps the admitted set inside the pool as it grows:

    charge = context + share x remaining_turns x growth_per_turn

* `growth_per_turn`: the sample's own mean growth so far (tokens added per finished turn),
  else the mean of the run's finished samples, else the prior;
* `remaining_turns`: the length predictor's estimate (finished siblings first), else the run's
  finished samples' mean turns minus the turns done, else the prior;
* `share`: 0 charges today's context (`current`), 1/2 the mean over the remaining life under
  linear growth (`remaining_mean`), 1 the predicted final context (`peak`).

These three start from priors (turns, tokens a turn) that a workload can miss several-fold, and
the whole first wave is admitted on them. `expected_final` needs none: it charges the final
context expected of a sample still live at its context now, a censored (Kaplan-Meier) estimate
from the run's finished and live samples with the unobserved tail at the context limit
(`rollout.core.final_context`); a sample that has not generated yet is charged the unconditional
expectation (`newcomer_tokens`), the context limit until something has finished.

Learned from the run itself, so it needs no per-workload setting. Pure accounting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rollout.core.final_context import FinalContextEstimate

__all__ = ["ChargeRule", "ContextGrowth"]

ChargeRule = Literal["current", "remaining_mean", "peak", "expected_final"]

_SHARE: dict[str, float] = {
    "current": 0.0,
    "remaining_mean": 0.5,
    "peak": 1.0,
    "expected_final": 1.0,
}


@dataclass(slots=True)
class _Live:
    first_context: int
    context: int
    turns_done: int


class ContextGrowth:
    """Per-sample context history and the run's finished samples (module docstring)."""

    def __init__(
        self,
        rule: ChargeRule,
        *,
        prior_turn_tokens: float,
        prior_turns: float,
        ceiling_tokens: int = 0,
        window: int = 2048,
    ) -> None:
        """`ceiling_tokens` (the context limit) and `window` (latest finished samples that
        count) are for `expected_final`, which needs the limit."""
        if rule not in _SHARE:
            raise ValueError(f"unknown charge rule {rule!r}; one of {sorted(_SHARE)}")
        self._share = _SHARE[rule]
        self._finals: FinalContextEstimate | None = None
        if rule == "expected_final":
            if ceiling_tokens < 1:
                raise ValueError("the expected_final rule needs the context limit (ceiling_tokens)")
            self._finals = FinalContextEstimate(ceiling_tokens, window)
        self._updates_since_rebuild = 0
        self._prior_turn_tokens = prior_turn_tokens
        self._prior_turns = prior_turns
        self._live: dict[str, _Live] = {}
        self._finished = 0
        self._finished_turns = 0
        self._finished_growth = 0.0  # tokens added over the finished samples' turns

    @property
    def share(self) -> float:
        return self._share

    def generated(self, sample_id: str, context_tokens: int) -> None:
        """A generation ended with the sample's context at `context_tokens`."""
        live = self._live.get(sample_id)
        if live is None:
            self._live[sample_id] = _Live(context_tokens, context_tokens, 0)
        else:
            live.context = context_tokens
        self._count_update()

    def turn_done(self, sample_id: str, context_tokens: int, turns_done: int) -> None:
        """A turn (generation and tool) ended; the context includes the tool's output."""
        live = self._live.get(sample_id)
        if live is None:
            self._live[sample_id] = live = _Live(context_tokens, context_tokens, 0)
        live.context, live.turns_done = context_tokens, turns_done

    def finished(self, sample_id: str) -> None:
        """The sample ended: its growth teaches the run's mean."""
        live = self._live.pop(sample_id, None)
        if live is not None and self._finals is not None:
            self._finals.finished(live.context)
        if live is None or live.turns_done < 1:
            return
        self._finished += 1
        self._finished_turns += live.turns_done
        self._finished_growth += max(0, live.context - live.first_context)

    def forget(self, sample_id: str) -> None:
        """The sample's attempt ended without teaching anything (a retry starts over)."""
        self._live.pop(sample_id, None)

    def growth_per_turn(self, sample_id: str) -> float:
        """Tokens a turn adds, expected for this sample."""
        live = self._live.get(sample_id)
        if live is not None and live.turns_done >= 1:
            return max(0.0, (live.context - live.first_context) / live.turns_done)
        if self._finished_turns:
            return self._finished_growth / self._finished_turns
        return self._prior_turn_tokens

    def remaining_turns(self, sample_id: str, predicted: float | None) -> float:
        """The predictor's estimate, else the run's mean length minus the turns done."""
        if predicted is not None:
            return max(0.0, predicted)
        live = self._live.get(sample_id)
        done = live.turns_done if live is not None else 0
        mean = self._finished_turns / self._finished if self._finished else self._prior_turns
        return max(1.0, mean - done)

    def state_dict(self) -> dict[str, list[int]]:
        """What a checkpoint keeps: the finished samples' final contexts (expected_final)."""
        return {} if self._finals is None else {"final_contexts": self._finals.finals()}

    def load_state_dict(self, state: Mapping[str, Sequence[int]]) -> None:
        """Resume from `state_dict()` (an empty or foreign state changes nothing)."""
        if self._finals is not None and "final_contexts" in state:
            self._finals.load_finals(state["final_contexts"])

    def newcomer_tokens(self) -> float | None:
        """What a sample that has not generated yet is charged (None: the gate's own estimate,
        a first context)."""
        if self._finals is None:
            return None
        return self._expected_final(0)

    def charge(self, sample_id: str, context_tokens: int, predicted_turns: float | None) -> int:
        """The tokens to charge the sample against the live budget now."""
        if self._share == 0.0:
            return context_tokens
        if self._finals is not None:
            return round(self._expected_final(context_tokens))
        ahead = self.remaining_turns(sample_id, predicted_turns) * self.growth_per_turn(sample_id)
        return context_tokens + round(self._share * ahead)

    def _count_update(self) -> None:
        """About once per round of the live set's turns, the censored contexts have moved."""
        if self._finals is None:
            return
        self._updates_since_rebuild += 1
        if self._updates_since_rebuild >= len(self._live):
            self._finals.mark_stale()

    def _expected_final(self, context_tokens: int) -> float:
        finals = self._finals
        assert finals is not None
        if finals.stale:
            finals.rebuild(live.context for live in self._live.values())
            self._updates_since_rebuild = 0
        return finals.expected_final(context_tokens)
