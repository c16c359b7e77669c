"""`SlotTurnover`: whether preempting a generation for a slot is worth what it costs.

A slot preemption swaps who decodes; the engine does the same work either way, except that
the victim comes back later with one more prefill forward, and a forward stalls every
generation running on the engine. So a preemption moves one critical sample forward by the
time it would otherwise wait for a slot to free naturally, and delays each critical
generation running there by about one forward step. It pays when

    natural wait  >  step time × critical generations running there (at least 1)

measured per engine from the generations it finished: the mean time a generation holds its
slot (engine queue and prefill included) over the generations running now is the natural
wait (under continuous batching a slot frees every `hold / running` seconds), and the slot
time per generated token is the step time. Simulated on short_context/32B B=16 (32 slots,
turns of ~4 s): the natural wait was ~0.13 s against ~0.7 s of stalls, and 627 preemptions
over 10 steps cost 402 extra prefill forwards and 1.2 % of T_next; with few slots and long
turns (8 slots, 30 s turns) the wait is seconds and preemption still fires.

Until an engine has finished a generation there is nothing to measure, and a preemption is
allowed (the rule before). Pure accounting: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SlotTurnover"]


@dataclass(slots=True)
class _Held:
    """Sums over an engine's finished generations."""

    generations: int = 0
    hold_s: float = 0.0
    tokens: int = 0


class SlotTurnover:
    """Per-engine slot hold times, and the payoff test of a slot preemption (module doc)."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def finished(self, engine: str, hold_s: float, tokens: int) -> None:
        """A generation on `engine` held its slot `hold_s` seconds and wrote `tokens`."""
        held = self._held.setdefault(engine, _Held())
        held.generations += 1
        held.hold_s += max(0.0, hold_s)
        held.tokens += max(0, tokens)

    def natural_wait_s(self, engine: str, running: int) -> float | None:
        """Expected seconds until one of `running` generations frees its slot; None unmeasured."""
        held = self._held.get(engine)
        if held is None or not held.generations or running < 1:
            return None
        return held.hold_s / held.generations / running

    def step_s(self, engine: str) -> float | None:
        """Slot seconds per generated token (about one forward step); None unmeasured."""
        held = self._held.get(engine)
        if held is None or not held.tokens:
            return None
        return held.hold_s / held.tokens

    def preemption_pays(self, engine: str, running: int, critical_running: int) -> bool:
        """Whether freeing a slot on `engine` now gains a critical sample more than the extra
        forward costs the critical generations running there (True while unmeasured)."""
        wait_s = self.natural_wait_s(engine, running)
        step_s = self.step_s(engine)
        if wait_s is None or step_s is None:
            return True
        return wait_s > step_s * max(1, critical_running)
