"""`FinalContextEstimate`: how long a live sample's context will end, from the run's own samples.

The live-KV gate must charge a sample what it will hold, not what it holds: agent contexts grow
5-8x over a trajectory. What a run knows about final contexts is *censored*: the samples that
finished say where they ended, the live ones only that they will end above where they are now.
The first samples to finish are the short ones, so a mean over finished samples alone is biased
low exactly when the first wave is admitted (simulated on a 6x-growth SWE trace: 17x the
recomputation of a trajectory-level baseline).

The Kaplan-Meier estimate uses both: the survival curve of final context, with finished samples
as events and live ones as censored at their context now. Whatever mass the curve leaves beyond
the last finished sample is put at the episode's context limit (`ceiling_tokens`): with nothing
finished yet every sample is expected to reach the limit, and as samples finish the estimate
comes down to what the run shows. No prior, no per-workload setting.

    expected_final(c) = E[final | final > c]   (at least c, at most the ceiling)

A resumed run starts from the finished samples its checkpoint kept (`finals`, `load_finals`),
not from the limit. The curve is rebuilt after a sample finishes, and otherwise once the live
contexts have been updated as many times as there are live samples (about once per round of
turns). Pure accounting, no clock.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable

__all__ = ["FinalContextEstimate"]


class FinalContextEstimate:
    """Censored estimate of final contexts (see the module docstring)."""

    def __init__(self, ceiling_tokens: int, window: int) -> None:
        """`ceiling_tokens`: the context limit (where unobserved mass goes); `window`: how many
        of the latest finished samples count (the run's lengths drift as training goes)."""
        if ceiling_tokens < 1:
            raise ValueError(f"ceiling_tokens must be positive, got {ceiling_tokens}")
        if window < 1:
            raise ValueError(f"window must be positive, got {window}")
        self._ceiling = ceiling_tokens
        self._finals: deque[int] = deque(maxlen=window)
        self._points: list[int] = []  # finished final contexts, ascending, distinct
        self._mass_above: list[float] = []  # KM mass at points[i:] plus the tail
        self._weighted_above: list[float] = []  # that mass times its context
        self._tail = 1.0  # mass beyond the last finished sample (at the ceiling)
        self._stale = True

    def finished(self, final_tokens: int) -> None:
        """A sample ended with its context at `final_tokens`."""
        self._finals.append(min(final_tokens, self._ceiling))
        self._stale = True

    def finals(self) -> list[int]:
        """The finished samples' final contexts that count now, oldest first (a checkpoint)."""
        return list(self._finals)

    def load_finals(self, finals: Iterable[int]) -> None:
        """Start from a checkpoint's `finals()`: a resumed run does not begin at the limit."""
        self._finals.clear()
        for final in finals:
            self.finished(int(final))

    def mark_stale(self) -> None:
        """The live contexts moved enough that the curve should be rebuilt before next use."""
        self._stale = True

    @property
    def stale(self) -> bool:
        return self._stale

    def rebuild(self, live_contexts: Iterable[int]) -> None:
        """Recompute the curve from the finished samples and the live ones' contexts now."""
        events = sorted(self._finals)
        censored = sorted(min(c, self._ceiling) for c in live_contexts)
        at_risk = len(events) + len(censored)
        survival = 1.0
        points: list[int] = []
        masses: list[float] = []
        e = c = 0
        while e < len(events):
            value = events[e]
            while c < len(censored) and censored[c] < value:  # left the risk set unseen
                at_risk -= 1
                c += 1
            deaths = 0
            while e < len(events) and events[e] == value:
                deaths += 1
                e += 1
            mass = survival * deaths / at_risk
            survival -= mass
            at_risk -= deaths
            points.append(value)
            masses.append(mass)
        self._points = points
        self._tail = max(0.0, survival)
        tail_weighted = self._tail * self._ceiling
        mass_above = [0.0] * (len(points) + 1)
        weighted_above = [0.0] * (len(points) + 1)
        mass_above[-1], weighted_above[-1] = self._tail, tail_weighted
        for i in range(len(points) - 1, -1, -1):
            mass_above[i] = mass_above[i + 1] + masses[i]
            weighted_above[i] = weighted_above[i + 1] + masses[i] * points[i]
        self._mass_above = mass_above
        self._weighted_above = weighted_above
        self._stale = False

    def expected_final(self, context_tokens: int) -> float:
        """E[final context | it ends above `context_tokens`] (0 = a sample not started yet)."""
        if not self._mass_above:
            return float(max(context_tokens, self._ceiling))
        i = bisect.bisect_right(self._points, context_tokens)
        mass = self._mass_above[i]
        if mass <= 1e-12:  # every sample like it has finished below: expect the limit
            return float(max(context_tokens, self._ceiling))
        return max(float(context_tokens), self._weighted_above[i] / mass)
