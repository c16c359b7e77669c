"""Fit the cost model's coefficients to measured timings (pure; see perf-model.md §9).

From the measured rows (seconds per whole model, all layers):
* GEMMs of N tokens: `t(N) = max(t_weights, N·b_c)` -> `t_weights` is the time at the smallest
  N (weights streamed once), `b_c` the slope of the largest Ns (compute-bound);
* decode attention of B requests over L context tokens: `t = a + c_dec·B·L` -> `c_dec`;
* prefill attention of n new tokens over p cached ones: `t = a + c_pf·n(p + n/2)` -> `c_pf`;
* host<->device copies of `bytes`: `t = latency + bytes / bandwidth` per direction.
`t_fix` and `b_tok` (launch, sampling, non-GEMM work) need a full engine: they keep their
configured values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FittedCost", "apply_to_model", "fit_calibration", "least_squares"]


@dataclass(frozen=True, slots=True)
class FittedCost:
    t_weights_s: float
    b_c_s: float
    c_dec_s: float
    c_pf_s: float
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Intercept and slope of the line through `(xs, ys)` (ValueError without two distinct xs)."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a line needs at least two distinct x values")
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return mean_y - slope * mean_x, slope


def fit_calibration(result: Mapping[str, Any]) -> FittedCost:
    """The coefficients from a `measure` JSON (see the module docstring)."""
    gemm = sorted((row["tokens"], row["seconds"]) for row in result["gemm"])
    t_weights = gemm[0][1]
    top = gemm[-3:] if len(gemm) >= 3 else gemm
    b_c = max(0.0, least_squares([n for n, _ in top], [t for _, t in top])[1])
    decode = result["decode"]
    _, c_dec = least_squares(
        [row["batch"] * row["context"] for row in decode], [row["seconds"] for row in decode]
    )
    prefill = result["prefill"]
    _, c_pf = least_squares(
        [row["new"] * (row["prefix"] + row["new"] / 2) for row in prefill],
        [row["seconds"] for row in prefill],
    )
    bandwidth = {}
    for direction in ("h2d", "d2h"):
        rows = [row for row in result["link"] if row["direction"] == direction]
        _, seconds_per_byte = least_squares(
            [row["bytes"] for row in rows], [row["seconds"] for row in rows]
        )
        bandwidth[direction] = 1.0 / seconds_per_byte if seconds_per_byte > 0 else float("inf")
    return FittedCost(
        t_weights_s=t_weights,
        b_c_s=b_c,
        c_dec_s=max(0.0, c_dec),
        c_pf_s=max(0.0, c_pf),
        h2d_bytes_per_s=bandwidth["h2d"],
        d2h_bytes_per_s=bandwidth["d2h"],
    )


def apply_to_model(model: Mapping[str, Any], fitted: FittedCost) -> dict[str, Any]:
    """`model` (a configs/model/*.yaml mapping) with the fitted cost coefficients."""
    cost = {
        **model["cost"],
        "t_weights_s": fitted.t_weights_s,
        "b_c_s": fitted.b_c_s,
        "c_dec_s": fitted.c_dec_s,
        "c_pf_s": fitted.c_pf_s,
    }
    return {**model, "cost": cost}
