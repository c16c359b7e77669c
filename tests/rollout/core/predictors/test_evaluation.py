"""Spec of the predictor-quality metrics."""

from __future__ import annotations

import random

import pytest

from rollout.core.predictors.evaluation import kendall_tau, mean_absolute_error, spearman_rho


def test_identical_rankings_have_tau_one() -> None:
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)


def test_reversed_rankings_have_tau_minus_one() -> None:
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


def test_one_swapped_pair_of_four_gives_tau_two_thirds() -> None:
    # 6 pairs, 5 concordant, 1 discordant: (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)


def test_tau_b_corrects_for_ties() -> None:
    # x has one tied pair: 5 comparable pairs on x, 6 on y; 5 concordant -> 5 / sqrt(5 * 6)
    assert kendall_tau([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / (30**0.5))


def test_blockwise_tau_matches_a_direct_count_on_many_points() -> None:
    rng = random.Random(0)
    x = [rng.randint(0, 20) for _ in range(600)]
    y = [xi + rng.randint(-5, 5) for xi in x]
    concordant = sum(
        ((x[i] > x[j]) - (x[i] < x[j])) * ((y[i] > y[j]) - (y[i] < y[j]))
        for i in range(len(x))
        for j in range(i + 1, len(x))
    )
    pairs = len(x) * (len(x) - 1) // 2
    ties_x = sum(x[i] == x[j] for i in range(len(x)) for j in range(i + 1, len(x)))
    ties_y = sum(y[i] == y[j] for i in range(len(y)) for j in range(i + 1, len(y)))
    expected = concordant / ((pairs - ties_x) * (pairs - ties_y)) ** 0.5
    assert kendall_tau(x, y) == pytest.approx(expected)


def test_constant_prediction_has_zero_rank_correlation() -> None:
    assert kendall_tau([5, 5, 5], [1, 2, 3]) == 0.0
    assert spearman_rho([5, 5, 5], [1, 2, 3]) == 0.0


def test_spearman_of_one_adjacent_swap_of_four() -> None:
    # 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 6 * 2 / 60
    assert spearman_rho([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)


def test_spearman_uses_average_ranks_for_ties() -> None:
    assert spearman_rho([1, 1, 2], [1, 1, 2]) == pytest.approx(1.0)


def test_mean_absolute_error() -> None:
    assert mean_absolute_error([1.0, 5.0], [2.0, 2.0]) == pytest.approx(2.0)


def test_unequal_lengths_are_rejected() -> None:
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1])
