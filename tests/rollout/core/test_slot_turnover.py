"""`SlotTurnover`: a slot preemption pays only when a slot would not free soon by itself."""

from __future__ import annotations

import pytest

from rollout.core.slot_turnover import SlotTurnover


def test_an_engine_with_nothing_finished_allows_a_preemption() -> None:
    turnover = SlotTurnover()
    assert turnover.natural_wait_s("e0", running=8) is None and turnover.step_s("e0") is None
    assert turnover.preemption_pays("e0", running=8, critical_running=4)


def test_the_natural_wait_is_the_mean_hold_over_the_running_generations() -> None:
    turnover = SlotTurnover()
    turnover.finished("e0", hold_s=4.0, tokens=100)
    turnover.finished("e0", hold_s=2.0, tokens=100)
    assert turnover.natural_wait_s("e0", running=3) == pytest.approx(1.0)
    assert turnover.step_s("e0") == pytest.approx(0.03)
    assert turnover.natural_wait_s("e1", running=3) is None  # per engine


@pytest.mark.parametrize(
    ("running", "critical_running", "pays"),
    [
        (32, 20, False),  # many slots, short turns: a slot frees every 0.13 s, stalls cost 0.6 s
        (8, 6, True),  # few slots: a slot frees every 0.5 s, stalls cost 0.18 s
        (32, 0, True),  # no critical generation to stall: one step is the cost
    ],
)
def test_a_preemption_pays_when_the_wait_outweighs_a_step_per_critical_generation(
    running: int, critical_running: int, pays: bool
) -> None:
    turnover = SlotTurnover()
    turnover.finished("e0", hold_s=4.0, tokens=133)  # ~30 ms a token
    assert turnover.preemption_pays("e0", running, critical_running) is pays
