"""`TokenModel`: what the simulated engine generates (token ids, logprobs, where a turn stops).

The engine simulates *time*; a token model decides *content*. At arrival the engine asks for the
request's `TurnPlan` (the tokens the model would produce if nothing stopped it), generates up to
`max_new_tokens` of them at the pace of the cost model, and reports back how many it produced
and why it ended, so a stateful model can continue an aborted turn when the caller resubmits
prompt + partial output. `rollout.simulation.workload.ScriptedTokenModel` is the synthetic
implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rollout.engines.base import EngineError, FinishReason, GenerateRequest

__all__ = ["TokenModel", "TurnPlan", "unfinished_rest"]


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """The output a request would get without a length limit or an abort.

    `ends_with_stop`: the last id is a stop token, so reaching it finishes with `STOP`; otherwise
    the model would keep going and the request ends at `max_new_tokens` (`LENGTH`).
    """

    output_ids: tuple[int, ...]
    output_logprobs: tuple[float, ...]
    ends_with_stop: bool

    def __post_init__(self) -> None:
        if not self.output_ids:
            raise EngineError("a turn plan must hold at least one token (the engine samples one)")
        if len(self.output_ids) != len(self.output_logprobs):
            raise EngineError(
                f"a turn plan has {len(self.output_ids)} ids but {len(self.output_logprobs)} "
                "logprobs; give one logprob per token"
            )


def unfinished_rest(plan: TurnPlan, produced_tokens: int, reason: FinishReason) -> TurnPlan | None:
    """What is left of `plan` after an abort, or None when the turn is over.

    Stateful token models keep this rest and serve it to the resubmission of prompt + partial
    output, so an aborted and resumed turn comes out identical to one that never was.
    """
    if reason is not FinishReason.ABORT or produced_tokens >= len(plan.output_ids):
        return None
    return TurnPlan(
        plan.output_ids[produced_tokens:],
        plan.output_logprobs[produced_tokens:],
        plan.ends_with_stop,
    )


@runtime_checkable
class TokenModel(Protocol):
    """Decides the tokens of each generation; must be deterministic for a seed."""

    def plan(self, request: GenerateRequest) -> TurnPlan:
        """The planned output of `request` (called once, when it arrives)."""
        ...

    def on_finish(
        self, request: GenerateRequest, produced_tokens: int, reason: FinishReason
    ) -> None:
        """`request` ended after `produced_tokens` of its plan (`ABORT`: it may be resumed)."""
        ...
