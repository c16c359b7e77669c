"""`FinalContextEstimate`: a censored (Kaplan-Meier) estimate of final contexts, with what the
run has not seen put at the context limit."""

from __future__ import annotations

import random

import pytest

from rollout.core.context_growth import ContextGrowth
from rollout.core.final_context import FinalContextEstimate


def test_with_nothing_finished_every_sample_is_expected_to_reach_the_limit() -> None:
    estimate = FinalContextEstimate(ceiling_tokens=100_000, window=64)
    assert estimate.expected_final(0) == 100_000  # before any rebuild
    estimate.rebuild([5_000, 40_000])
    assert estimate.expected_final(0) == 100_000
    assert estimate.expected_final(120_000) == 120_000  # never below the context now


def test_live_samples_count_as_censored_and_the_unseen_tail_sits_at_the_limit() -> None:
    estimate = FinalContextEstimate(ceiling_tokens=100_000, window=64)
    estimate.finished(10_000)
    estimate.finished(20_000)
    # at 10k four samples are at risk (the one live at 5k left before): mass 1/4 there, then
    # 3/4 x 1/3 at 20k, and half the mass is beyond every finished sample
    estimate.rebuild([5_000, 30_000, 40_000])
    assert estimate.expected_final(0) == pytest.approx(
        0.25 * 10_000 + 0.25 * 20_000 + 0.5 * 100_000
    )
    assert estimate.expected_final(15_000) == pytest.approx((0.25 * 20_000 + 0.5 * 100_000) / 0.75)
    assert estimate.expected_final(25_000) == pytest.approx(100_000)


def test_a_mean_over_finished_samples_alone_is_biased_low_early_and_this_is_not() -> None:
    rng = random.Random(0)
    finals = [int(rng.lognormvariate(10.5, 0.6)) for _ in range(400)]  # true mean ~43k
    true_mean = sum(finals) / len(finals)
    # halfway through: the samples that ended below 30k have finished, the rest are live at 30k
    estimate = FinalContextEstimate(ceiling_tokens=10**7, window=4096)
    done = [f for f in finals if f < 30_000]
    for f in done:
        estimate.finished(f)
    estimate.rebuild([30_000] * (len(finals) - len(done)))
    naive = sum(done) / len(done)
    assert naive < 0.6 * true_mean  # what a mean over finished samples would charge
    # the censored estimate is pessimistic (tail at the limit), never below the truth
    assert estimate.expected_final(0) >= true_mean


def test_when_every_sample_has_finished_the_estimate_is_their_mean() -> None:
    estimate = FinalContextEstimate(ceiling_tokens=100_000, window=64)
    for f in (10_000, 20_000, 30_000):
        estimate.finished(f)
    estimate.rebuild([])
    assert estimate.expected_final(0) == pytest.approx(20_000)
    assert estimate.expected_final(15_000) == pytest.approx(25_000)
    # a sample live above every finished one: nothing like it has ended, expect the limit
    assert estimate.expected_final(35_000) == 100_000


def test_only_the_latest_window_of_finished_samples_counts() -> None:
    estimate = FinalContextEstimate(ceiling_tokens=100_000, window=2)
    for f in (1_000, 50_000, 50_000):
        estimate.finished(f)
    estimate.rebuild([])
    assert estimate.expected_final(0) == pytest.approx(50_000)


@pytest.mark.parametrize(("ceiling", "window"), [(0, 8), (100, 0)])
def test_bad_settings_are_refused(ceiling: int, window: int) -> None:
    with pytest.raises(ValueError):
        FinalContextEstimate(ceiling_tokens=ceiling, window=window)


def test_the_expected_final_rule_charges_newcomers_and_live_samples_from_the_run() -> None:
    growth = ContextGrowth(
        "expected_final", prior_turn_tokens=1, prior_turns=1, ceiling_tokens=100_000
    )
    assert growth.newcomer_tokens() == 100_000  # nothing finished: the limit
    assert growth.charge("a", 5_000, predicted_turns=3) == 100_000
    for name, final in (("x", 20_000), ("y", 20_000)):
        growth.generated(name, 4_000)
        growth.turn_done(name, final, 5)
        growth.finished(name)
    growth.generated("a", 30_000)
    # a (live at 30k) is censored above both events: 1/3 + 1/3 at 20k, 1/3 at the limit
    assert growth.newcomer_tokens() == pytest.approx((2 * 20_000 + 100_000) / 3)
    assert growth.charge("a", 30_000, predicted_turns=3) == 100_000


def test_the_expected_final_rule_needs_the_context_limit() -> None:
    with pytest.raises(ValueError, match="context limit"):
        ContextGrowth("expected_final", prior_turn_tokens=1, prior_turns=1)


def test_a_checkpoint_of_the_finished_samples_restores_the_same_estimate() -> None:
    first = FinalContextEstimate(ceiling_tokens=100_000, window=3)
    for f in (5_000, 10_000, 20_000, 30_000):
        first.finished(f)
    assert first.finals() == [10_000, 20_000, 30_000]  # the window's latest, oldest first
    second = FinalContextEstimate(ceiling_tokens=100_000, window=3)
    second.load_finals(first.finals())
    for estimate in (first, second):
        estimate.rebuild([])
    assert second.expected_final(12_000) == first.expected_final(12_000) == 25_000
