"""`ContextGrowth`: a live sample is charged the context it is expected to hold over the rest of
its life, learned from its own turns and the run's finished samples."""

from __future__ import annotations

import pytest

from rollout.core.context_growth import ContextGrowth


def growth(rule: str = "remaining_mean") -> ContextGrowth:
    return ContextGrowth(rule, prior_turn_tokens=1000, prior_turns=20)  # type: ignore[arg-type]


def test_the_current_rule_charges_the_context_now() -> None:
    model = growth("current")
    model.turn_done("s", 5000, 2)
    assert model.charge("s", 6000, predicted_turns=10) == 6000


def test_a_sample_is_charged_half_its_predicted_growth_under_the_remaining_mean_rule() -> None:
    model = growth()
    model.generated("s", 4000)  # first context
    model.turn_done("s", 8000, 2)  # 2,000 tokens a turn so far
    assert model.charge("s", 8000, predicted_turns=10) == 8000 + 10 * 2000 // 2


def test_the_peak_rule_charges_the_predicted_final_context() -> None:
    model = growth("peak")
    model.generated("s", 4000)
    model.turn_done("s", 8000, 2)
    assert model.charge("s", 8000, predicted_turns=10) == 8000 + 10 * 2000


def test_before_its_first_turn_a_sample_grows_as_the_runs_finished_samples_did() -> None:
    model = growth("peak")
    model.generated("done", 1000)
    model.turn_done("done", 31000, 10)  # 3,000 tokens a turn
    model.finished("done")
    model.generated("new", 1200)
    assert model.growth_per_turn("new") == pytest.approx(3000)


def test_with_no_finished_sample_the_prior_growth_applies() -> None:
    model = growth("peak")
    model.generated("new", 1200)
    assert model.growth_per_turn("new") == 1000


def test_without_a_prediction_the_remaining_turns_come_from_the_runs_mean_length() -> None:
    model = growth()
    for name, turns in (("a", 10), ("b", 30)):
        model.generated(name, 100)
        model.turn_done(name, 100 + turns, turns)
        model.finished(name)
    model.turn_done("s", 500, 5)
    assert model.remaining_turns("s", predicted=None) == pytest.approx(15)
    assert model.remaining_turns("s", predicted=3.5) == 3.5


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown charge rule"):
        ContextGrowth("max", prior_turn_tokens=1, prior_turns=1)  # type: ignore[arg-type]
