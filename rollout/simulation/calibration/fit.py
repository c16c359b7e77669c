"""Fit the cost model's coefficients to measured timings (pure; see perf-model.md §9).

    t_step = t_fix + max(t_weights, N·b_c) + b_tok·N + c_dec·ΣL + c_pf·Σ n(p + n/2)

From the micro-benchmarks (seconds per whole model, all layers):
* GEMMs of N tokens: `t(N) = max(t_weights, N·b_c)` -> `t_weights` is the time at the smallest
  N (weights streamed once), `b_c` the slope of the largest Ns (compute-bound);
* decode attention of B requests over L tokens: `t = a + c_dec·B·L`; prefill attention of n
  new tokens over p cached ones: `t = a + c_pf·n(p + n/2)`;
* host<->device copies of `bytes`: `t = latency + bytes / bandwidth` per direction.

From whole steps (`conductor calibrate validate`), which is what the simulator predicts: every
decode and prefill row, less the dense layers' `max(t_weights, N·b_c)` (the GEMM micro terms),
is `t_fix + b_tok·N + c_dec·ΣL + c_pf·n(p + n/2)`, linear in the four, fitted together. One
fit over both kinds, because b_tok is shared: the decode rows alone would give it the cost
that grows with the batch (issue 31's four H200 rows: 33 µs per request), which, charged to
every token of an 8k-token chunk, predicts +95 % for its prefill. c_dec of a whole step
includes what the attention kernel alone does not (the KV write, launch and tail). The mixed
rows are not fitted: they test the additive form.
The fit minimises the squared *relative* error (weights 1/t²), so a 5 ms step counts as much as
a 250 ms one, and no coefficient is negative (one that would be is set to 0 and the rest refit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rollout.engines.sim.cost_model import prefill_attention_units
from rollout.simulation.calibration.config import StepShape

__all__ = [
    "FittedCost",
    "apply_to_model",
    "fit_calibration",
    "fit_micro",
    "fit_steps",
    "least_squares",
    "nonnegative_least_squares",
    "weighted_least_squares",
]


@dataclass(frozen=True, slots=True)
class FittedCost:
    """Fitted coefficients (seconds); `t_fix_s`/`b_tok_s` are None without whole steps (they
    need a whole forward: the configured values stay)."""

    t_weights_s: float
    b_c_s: float
    c_dec_s: float
    c_pf_s: float
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    t_fix_s: float | None = None
    b_tok_s: float | None = None

    def coefficients(self) -> dict[str, float]:
        """The cost-model fields this fit sets (`cost.*` of a model config)."""
        fields = {
            "t_fix_s": self.t_fix_s,
            "t_weights_s": self.t_weights_s,
            "b_c_s": self.b_c_s,
            "b_tok_s": self.b_tok_s,
            "c_dec_s": self.c_dec_s,
            "c_pf_s": self.c_pf_s,
        }
        return {name: value for name, value in fields.items() if value is not None}


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


def weighted_least_squares(
    columns: Sequence[Sequence[float]], ys: Sequence[float], weights: Sequence[float]
) -> tuple[float, ...]:
    """The coefficients c minimising Σ w_i (Σ_j c_j·columns[j][i] − y_i)².

    Solves the normal equations (each column scaled to unit size first, so seconds and token
    counts of very different magnitudes do not lose precision). Raises ValueError when the
    columns are linearly dependent on these rows (the grid cannot separate the terms).
    """
    k, n = len(columns), len(ys)
    if any(len(column) != n for column in columns) or len(weights) != n or n < k:
        raise ValueError(f"{k} coefficients need at least {k} rows of matching length")
    scales = [max(abs(value) for value in column) or 1.0 for column in columns]
    scaled = [
        [value / scale for value in column] for column, scale in zip(columns, scales, strict=True)
    ]
    normal = [
        [
            sum(w * a * b for w, a, b in zip(weights, scaled[i], scaled[j], strict=True))
            for j in range(k)
        ]
        + [sum(w * a * y for w, a, y in zip(weights, scaled[i], ys, strict=True))]
        for i in range(k)
    ]
    size = max(abs(normal[i][i]) for i in range(k)) or 1.0
    for pivot in range(k):  # Gaussian elimination with partial pivoting
        best = max(range(pivot, k), key=lambda row: abs(normal[row][pivot]))
        if abs(normal[best][pivot]) <= 1e-12 * size:
            raise ValueError("the rows cannot separate these terms (linearly dependent columns)")
        normal[pivot], normal[best] = normal[best], normal[pivot]
        for row in range(pivot + 1, k):
            factor = normal[row][pivot] / normal[pivot][pivot]
            normal[row] = [a - factor * b for a, b in zip(normal[row], normal[pivot], strict=True)]
    solution = [0.0] * k
    for row in reversed(range(k)):
        known = sum(normal[row][j] * solution[j] for j in range(row + 1, k))
        solution[row] = (normal[row][k] - known) / normal[row][row]
    return tuple(value / scale for value, scale in zip(solution, scales, strict=True))


def nonnegative_least_squares(
    columns: Sequence[Sequence[float]], ys: Sequence[float], weights: Sequence[float]
) -> tuple[float, ...]:
    """`weighted_least_squares` with every coefficient ≥ 0: while the fit has a negative
    coefficient, the most negative is fixed at 0 and the others are fitted again."""
    free = list(range(len(columns)))
    while True:
        fitted = weighted_least_squares([columns[j] for j in free], ys, weights)
        worst = min(range(len(free)), key=lambda i: fitted[i])
        if fitted[worst] >= 0 or len(free) == 1:
            solution = [0.0] * len(columns)
            for index, value in zip(free, fitted, strict=True):
                solution[index] = max(0.0, value)
            return tuple(solution)
        free.pop(worst)


def _relative(ys: Sequence[float]) -> list[float]:
    """Weights 1/t² (squared relative error), from the measured times."""
    return [1.0 / (t * t) for t in ys]


def fit_micro(result: Mapping[str, Any]) -> FittedCost:
    """The coefficients of a micro sweep (`measure.measure`'s rows; see the module docstring)."""
    gemm = sorted((row["tokens"], row["seconds"]) for row in result["gemm"])
    if len(gemm) < 2:
        raise ValueError("the GEMM rows need at least two token counts")
    t_weights = gemm[0][1]
    top = gemm[-3:] if len(gemm) >= 3 else gemm
    b_c = max(0.0, least_squares([n for n, _ in top], [t for _, t in top])[1])
    decode = result["decode"]
    _, c_dec = least_squares(
        [row["batch"] * row["context"] for row in decode], [row["seconds"] for row in decode]
    )
    prefill = result["prefill"]
    _, c_pf = least_squares(
        [prefill_attention_units(row["new"], row["prefix"]) for row in prefill],
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


def _shape(row: Mapping[str, Any]) -> StepShape:
    return StepShape(
        decode_batch=row["decode_batch"],
        decode_context=row["decode_context"],
        prefill_chunk=row["prefill_chunk"],
        prefill_prefix=row["prefill_prefix"],
    )


def fit_steps(rows: Sequence[Mapping[str, Any]], micro: FittedCost) -> FittedCost:
    """`micro` with t_fix, b_tok, c_dec and c_pf fitted to the whole decode and prefill steps
    (t_weights, b_c and the link stay the micro values; mixed rows are held out). See the
    module docstring.

    Raises ValueError when the rows cannot separate the terms (the decode grid needs two batch
    sizes and two contexts at least).
    """
    fitted = [row for row in rows if row["kind"] in ("decode", "prefill")]
    steps = [_shape(row) for row in fitted]
    seconds = [row["seconds"] for row in fitted]
    dense = [max(micro.t_weights_s, step.tokens * micro.b_c_s) for step in steps]
    columns = [
        [1.0] * len(steps),
        [float(step.tokens) for step in steps],
        [float(step.decode_batch * step.decode_context) for step in steps],
    ]
    with_prefill = any(step.prefill_chunk for step in steps)
    if with_prefill:
        columns.append(
            [prefill_attention_units(step.prefill_chunk, step.prefill_prefix) for step in steps]
        )
    coefficients = nonnegative_least_squares(
        columns, [t - d for t, d in zip(seconds, dense, strict=True)], _relative(seconds)
    )
    t_fix, b_tok, c_dec = coefficients[:3]
    c_pf = coefficients[3] if with_prefill else micro.c_pf_s
    return replace(micro, t_fix_s=t_fix, b_tok_s=b_tok, c_dec_s=c_dec, c_pf_s=c_pf)


def fit_calibration(result: Mapping[str, Any]) -> FittedCost:
    """The coefficients of a timings JSON: the micro fit, refined by the whole steps when the
    JSON has them (`conductor calibrate validate` writes both)."""
    micro = fit_micro(result)
    steps = result.get("steps")
    return fit_steps(steps, micro) if steps else micro


def apply_to_model(model: Mapping[str, Any], fitted: FittedCost) -> dict[str, Any]:
    """`model` (a configs/model/*.yaml mapping) with the fitted cost coefficients."""
    return {**model, "cost": {**model["cost"], **fitted.coefficients()}}
