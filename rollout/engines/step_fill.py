"""`StepFill`: how full each forward pass of an engine was against its token budget.

An engine that knows its forwards (the simulated one) records each as (kind, tokens, budget):
a prefill (or mixed) step runs its prompt chunks (plus one token per decode riding along)
against SGLang's per-forward budget `max_prefill_tokens`; a decode step runs one token per
running request against `max_running_requests` (the largest decode batch). The fill fraction
of a step is tokens / budget; `summary()` gives its mean and p99 over every step, and per kind.
A histogram, not a list: a long run has millions of decode steps but few distinct sizes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["StepFill"]


@dataclass(slots=True)
class StepFill:
    """Steps counted by (kind, tokens, budget); see the module docstring."""

    counts: dict[tuple[str, int, int], int] = field(default_factory=dict)

    def record(self, kind: str, tokens: int, budget: int, steps: int = 1) -> None:
        """`steps` forwards of `kind` ('prefill' or 'decode') that ran `tokens` tokens each."""
        if steps <= 0:
            return
        key = (kind, tokens, max(1, budget))
        self.counts[key] = self.counts.get(key, 0) + steps

    def merge(self, other: StepFill) -> None:
        """Add `other`'s steps (several engines' into one)."""
        for (kind, tokens, budget), steps in other.counts.items():
            self.record(kind, tokens, budget, steps)

    @property
    def steps(self) -> int:
        return sum(self.counts.values())

    @property
    def tokens(self) -> int:
        return sum(tokens * steps for (_, tokens, _), steps in self.counts.items())

    def summary(self) -> dict[str, object] | None:
        """`steps`, `tokens`, `mean_fill`, `p99_fill` over every step, and the same per kind
        (`prefill`, `decode`); None without a step."""
        if not self.counts:
            return None
        result = _figures(self.counts.items())
        for kind in ("prefill", "decode"):
            of_kind = [(key, steps) for key, steps in self.counts.items() if key[0] == kind]
            if of_kind:
                figures = _figures(of_kind)
                figures["budget_tokens"] = max(key[2] for key, _ in of_kind)
                result[kind] = figures
        return result


def _figures(items: Iterable[tuple[tuple[str, int, int], int]]) -> dict[str, object]:
    pairs = list(items)
    fills = sorted((tokens / budget, steps) for (_, tokens, budget), steps in pairs)
    total = sum(steps for _, steps in fills)
    rank = max(1, math.ceil(0.99 * total))  # nearest rank, as `observe.health.percentile`
    seen, p99 = 0, fills[-1][0]
    for fill, steps in fills:
        seen += steps
        if seen >= rank:
            p99 = fill
            break
    return {
        "steps": total,
        "tokens": sum(tokens * steps for (_, tokens, _), steps in pairs),
        "mean_fill": sum(fill * steps for fill, steps in fills) / total,
        "p99_fill": p99,
    }
