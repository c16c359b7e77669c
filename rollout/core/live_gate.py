"""`LiveKVBudget`: whether one more sample may go live while the live contexts fit a KV budget.

Action-level rollouts overlap one sample's tool time with others' generation. Without a bound,
every admitted sample is live at once and their contexts together outgrow the KV pool many times
over: the cache thrashes and re-prefills dominate (simulated: 2.7x slower than trajectory-level
async at 64 groups x 8 samples of the SWE-like workload). The budget lets one more sample go
live while the sum of live contexts (tokens) plus the expected first prompt stays within
`budget_tokens`; at least one sample is always live. A newcomer counts at the mean first context
seen so far (the prior before any), until it reports its own.

Pure accounting: the asyncio gate that makes samples wait their turn, oldest first, is
`rollout.runtime.live_gate.LiveKVGate`.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["LiveKVBudget"]


class LiveKVBudget:
    """The live samples' total context tokens against a budget (see the module docstring)."""

    def __init__(
        self,
        budget_tokens: float,
        prior_first_tokens: float = 0.0,
        newcomer_tokens: Callable[[], float | None] | None = None,
    ) -> None:
        """`prior_first_tokens`: what a newcomer is expected to add before any sample has
        reported its first context (without it the whole first wave would start at once)."""
        if budget_tokens <= 0:
            raise ValueError(f"budget_tokens must be positive, got {budget_tokens}")
        self._budget_tokens = budget_tokens
        self._prior_first_tokens = prior_first_tokens
        self._newcomer_tokens = newcomer_tokens
        self._context_tokens: dict[str, int] = {}
        self._total_tokens = 0
        self._not_generated: set[str] = set()  # live, but no context reported yet
        self._first_contexts = 0
        self._first_context_sum = 0

    @property
    def live(self) -> int:
        return len(self._context_tokens)

    @property
    def live_tokens(self) -> int:
        return self._total_tokens

    def fits(self) -> bool:
        """Whether one more sample may go live now."""
        if not self._context_tokens:
            return True
        return self._total_tokens + self._expected_first_tokens() <= self._budget_tokens

    def admit(self, sample_id: str) -> None:
        """Count the sample as live at the expected size of a first context until it reports."""
        estimate = round(self._expected_first_tokens())
        self._context_tokens[sample_id] = estimate
        self._total_tokens += estimate
        self._not_generated.add(sample_id)

    def update(self, sample_id: str, context_tokens: int) -> None:
        """A live sample's context is now `context_tokens` long (after a generation)."""
        previous = self._context_tokens.get(sample_id)
        if previous is None:
            return
        if sample_id in self._not_generated:
            self._not_generated.discard(sample_id)
            self._first_contexts += 1
            self._first_context_sum += context_tokens
        self._context_tokens[sample_id] = context_tokens
        self._total_tokens += context_tokens - previous

    def leave(self, sample_id: str) -> None:
        """The sample finished (or gave up); its context no longer counts."""
        self._total_tokens -= self._context_tokens.pop(sample_id, 0)
        self._not_generated.discard(sample_id)

    def _expected_first_tokens(self) -> float:
        if self._newcomer_tokens is not None:
            charged = self._newcomer_tokens()
            if charged is not None:
                return charged
        if not self._first_contexts:
            return self._prior_first_tokens
        return self._first_context_sum / self._first_contexts
