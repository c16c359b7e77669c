"""How good is a length predictor: rank correlation and mean absolute error on held-out data.

Ranking is what the scheduler consumes (the cheapest groups become critical), so Kendall's τ-b
and Spearman's ρ are the headline numbers, as in the learning-to-rank scheduling literature
(perf-model.md §7: τ ≈ 0.56 in-distribution for the best published predictors); MAE says how
far off the magnitudes are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rollout.core.predictors.base import LengthPredictor, RemainingWork, SampleContext

__all__ = [
    "PredictorReport",
    "evaluate_predictor",
    "kendall_tau",
    "mean_absolute_error",
    "spearman_rho",
]

_ROW_BLOCK = 256  # rows per block in the pairwise τ computation (bounds memory at n × 256)


@dataclass(frozen=True, slots=True)
class PredictorReport:
    """Quality of a predictor on `n` held-out (context, truth) pairs."""

    n: int
    kendall_tau_turns: float
    spearman_rho_turns: float
    mae_turns: float
    kendall_tau_tokens: float
    mae_tokens: float


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's τ-b (tie-corrected); 0.0 when either side is constant."""
    xs, ys = _paired(x, y)
    n = len(xs)
    if n < 2:
        return 0.0
    concordance = 0.0
    ties_x = 0
    ties_y = 0
    columns = np.arange(n)
    for start in range(0, n, _ROW_BLOCK):
        rows = np.arange(start, min(n, start + _ROW_BLOCK))
        upper = columns[None, :] > rows[:, None]
        sign_x = np.sign(xs[rows, None] - xs[None, :])
        sign_y = np.sign(ys[rows, None] - ys[None, :])
        concordance += float((sign_x * sign_y)[upper].sum())
        ties_x += int(((sign_x == 0) & upper).sum())
        ties_y += int(((sign_y == 0) & upper).sum())
    pairs = n * (n - 1) // 2
    denominator = math.sqrt((pairs - ties_x) * (pairs - ties_y))
    return concordance / denominator if denominator > 0 else 0.0


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's ρ: the Pearson correlation of average ranks; 0.0 when either side is constant."""
    xs, ys = _paired(x, y)
    if len(xs) < 2:
        return 0.0
    rank_x = _average_ranks(xs)
    rank_y = _average_ranks(ys)
    dx = rank_x - rank_x.mean()
    dy = rank_y - rank_y.mean()
    denominator = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    return float((dx * dy).sum()) / denominator if denominator > 0 else 0.0


def mean_absolute_error(predicted: Sequence[float], actual: Sequence[float]) -> float:
    """Mean of |predicted − actual|."""
    xs, ys = _paired(predicted, actual)
    return float(np.abs(xs - ys).mean()) if len(xs) else 0.0


def evaluate_predictor(
    predictor: LengthPredictor, held_out: Sequence[tuple[SampleContext, RemainingWork]]
) -> PredictorReport:
    """Predict every held-out context and compare with its truth."""
    predictions = [predictor.predict(context) for context, _ in held_out]
    pred_turns = [p.turns for p in predictions]
    true_turns = [truth.turns for _, truth in held_out]
    pred_tokens = [p.gen_tokens for p in predictions]
    true_tokens = [truth.gen_tokens for _, truth in held_out]
    return PredictorReport(
        n=len(held_out),
        kendall_tau_turns=kendall_tau(pred_turns, true_turns),
        spearman_rho_turns=spearman_rho(pred_turns, true_turns),
        mae_turns=mean_absolute_error(pred_turns, true_turns),
        kendall_tau_tokens=kendall_tau(pred_tokens, true_tokens),
        mae_tokens=mean_absolute_error(pred_tokens, true_tokens),
    )


def _paired(
    x: Sequence[float], y: Sequence[float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(
            f"need two equally long 1-d sequences, got shapes {xs.shape} and {ys.shape}"
        )
    return xs, ys


def _average_ranks(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """1-based ranks; tied values share the mean of their ranks."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks
