"""The recompute-driven cap: starts at a fraction of the slots, grows about one per turnover
while nothing is recomputed, backs off multiplicatively (with a cool-down) when something is."""

from __future__ import annotations

import pytest

from rollout.core.recompute_control import RecomputeControl, RecomputeControlConfig


def _control(**changes: object) -> RecomputeControl:
    config = RecomputeControlConfig(**changes)  # type: ignore[arg-type]
    return RecomputeControl(config, generation_slots=64, group_size=8)


def test_it_starts_at_its_fraction_of_the_slots_and_never_below_one_group() -> None:
    assert _control().limit == 16
    assert _control(start_fraction=0.05).limit == 8
    assert RecomputeControl(RecomputeControlConfig(), generation_slots=4, group_size=8).limit == 4


def test_it_grows_about_one_per_turnover_only_while_samples_wait_and_it_binds() -> None:
    control = _control()
    control.sample_finished(live=15, waiting=0)  # nobody waits: no reason to grow
    control.sample_finished(live=10, waiting=5)  # the cap did not bind
    assert control.limit == 16 and control.grows == 0
    for _ in range(16):
        control.sample_finished(live=15, waiting=5)
    assert control.limit == 16  # each finish adds 1/cap: a little under one per 16
    control.sample_finished(live=15, waiting=5)
    assert control.limit == 17 and control.grows == 1


def test_recomputation_cuts_it_once_per_cool_down_and_stops_growth_until_a_clean_poll() -> None:
    control = _control(cut_cooldown_s=10.0)
    control.poll(0, 0.0)  # the baseline
    control.poll(5_000, 5.0)
    assert control.limit == int(16 * 0.85) and control.cuts == 1
    control.poll(9_000, 8.0)  # still recomputing, inside the cool-down
    assert control.cuts == 1
    for _ in range(40):
        control.sample_finished(live=control.limit - 1, waiting=3)
    assert control.limit == int(16 * 0.85)  # no growth while the last poll saw recomputation
    control.poll(9_000, 20.0)  # clean
    for _ in range(40):
        control.sample_finished(live=control.limit - 1, waiting=3)
    assert control.limit > int(16 * 0.85)


def test_tolerated_recomputation_is_not_pressure_and_the_floor_holds() -> None:
    control = _control(tolerance_tokens=100, cut_cooldown_s=0.0)
    control.poll(0, 0.0)
    control.poll(100, 1.0)
    assert control.cuts == 0
    for step in range(2, 60):
        control.poll(step * 1_000, float(step))
    assert control.limit == 8  # one group


@pytest.mark.parametrize("field", ["start_fraction", "decrease_factor"])
def test_fractions_outside_their_range_are_refused(field: str) -> None:
    with pytest.raises(ValueError):
        RecomputeControlConfig(**{field: 1.5})  # type: ignore[arg-type]
