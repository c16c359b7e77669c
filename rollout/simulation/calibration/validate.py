"""Predicted vs measured whole steps, row by row, for the configured and calibrated models (pure).

`compare` prices every measured step on two cost models and `markdown` renders the table that
`conductor calibrate validate` prints and writes: per row the measured time, each model's
prediction and its relative error, and whether the row was fitted (decode and prefill rows) or
held out (mixed rows). `summary` gives each model's error range over the decode rows and the
rows beyond the sweep's `max_decode_error`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollout.engines.sim.cost_model import (
    CostModelConfig,
    prefill_attention_units,
    step_time_s,
)
from rollout.simulation.calibration.config import StepShape
from rollout.simulation.calibration.limits import ImpliedRate

__all__ = ["StepCheck", "compare", "markdown", "predict_s", "summary"]


def predict_s(cost: CostModelConfig, step: StepShape) -> float:
    """The cost model's seconds for `step` (one chunk, decode requests at one context)."""
    return step_time_s(
        cost,
        decode_requests=step.decode_batch,
        decode_context_tokens=step.decode_batch * step.decode_context,
        prefill_tokens=step.prefill_chunk,
        prefill_attention=prefill_attention_units(step.prefill_chunk, step.prefill_prefix)
        if step.prefill_chunk
        else 0.0,
    )


@dataclass(frozen=True, slots=True)
class StepCheck:
    """One measured step and what each model predicts for it."""

    step: StepShape
    measured_s: float
    configured_s: float
    calibrated_s: float

    @property
    def configured_error(self) -> float:
        """(predicted − measured) / measured for the configured model."""
        return self.configured_s / self.measured_s - 1.0

    @property
    def calibrated_error(self) -> float:
        """(predicted − measured) / measured for the calibrated model."""
        return self.calibrated_s / self.measured_s - 1.0

    @property
    def fitted(self) -> bool:
        """Whether the calibrated model was fitted to this row (mixed rows are held out)."""
        return self.step.kind != "mixed"


def compare(
    rows: Sequence[Mapping[str, Any]], configured: CostModelConfig, calibrated: CostModelConfig
) -> tuple[StepCheck, ...]:
    """Every measured step row priced on both models, in the rows' order."""
    checks = []
    for row in rows:
        step = StepShape(
            decode_batch=row["decode_batch"],
            decode_context=row["decode_context"],
            prefill_chunk=row["prefill_chunk"],
            prefill_prefix=row["prefill_prefix"],
        )
        checks.append(
            StepCheck(
                step, row["seconds"], predict_s(configured, step), predict_s(calibrated, step)
            )
        )
    return tuple(checks)


def summary(checks: Sequence[StepCheck], max_decode_error: float) -> dict[str, Any]:
    """Each model's error range on the decode rows, and the decode rows of the calibrated model
    beyond `max_decode_error` (empty: every decode row is within it)."""
    decode = [check for check in checks if check.step.kind == "decode"]
    if not decode:
        return {"decode_rows": 0}
    return {
        "decode_rows": len(decode),
        "configured_error_range": [
            min(c.configured_error for c in decode), max(c.configured_error for c in decode)
        ],
        "calibrated_error_range": [
            min(c.calibrated_error for c in decode), max(c.calibrated_error for c in decode)
        ],
        "calibrated_beyond_max_error": [
            _label(c.step) for c in decode if abs(c.calibrated_error) > max_decode_error
        ],
    }  # fmt: skip


def _label(step: StepShape) -> str:
    parts = []
    if step.decode_batch:
        parts.append(f"B={step.decode_batch:,} L={step.decode_context:,}")
    if step.prefill_chunk:
        parts.append(f"n={step.prefill_chunk:,} p={step.prefill_prefix:,}")
    return " + ".join(parts)


def markdown(
    checks: Sequence[StepCheck],
    *,
    configured_name: str,
    max_decode_error: float,
    rates: Sequence[ImpliedRate] = (),
) -> str:
    """The validate table (times in ms, errors in %; '!' marks a decode row of the calibrated
    model beyond `max_decode_error`), then each coefficient's implied rate."""
    lines = [
        f"| step | kind | measured (ms) | configured `{configured_name}` (ms) | error "
        "| calibrated (ms) | error | fitted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in checks:
        flag = (
            " !" if c.step.kind == "decode" and abs(c.calibrated_error) > max_decode_error else ""
        )
        lines.append(
            f"| {_label(c.step)} | {c.step.kind} | {c.measured_s * 1e3:.3f} "
            f"| {c.configured_s * 1e3:.3f} | {c.configured_error:+.1%} "
            f"| {c.calibrated_s * 1e3:.3f} | {c.calibrated_error:+.1%}{flag} "
            f"| {'yes' if c.fitted else 'held out'} |"
        )
    if rates:
        lines += ["", "| coefficient | implied rate | device peak | share |", "|---|---|---|---|"]
        for rate in rates:
            unit = "TFLOP/s" if rate.unit == "FLOP" else "TB/s"
            lines.append(
                f"| `{rate.coefficient}` | {rate.per_s / 1e12:.3f} {unit} "
                f"| {rate.limit_per_s / 1e12:.3f} {unit} | {rate.share:.0%}"
                f"{' **exceeds**' if rate.exceeds else ''} |"
            )
    return "\n".join(lines) + "\n"
