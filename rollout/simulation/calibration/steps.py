"""Whole forwards at a model's shapes (`conductor calibrate validate`), as the cost model prices.

Each row is one step of the `steps` sweep (decode over B × L, prefill chunks over prefixes,
the mixed steps), run by the `Decoder` end to end (every op of every layer, the LM head and
the pick) and timed as a `Timer` median: on CUDA, replayed from a CUDA graph as an engine
replays its decode graphs. Rows past the time budget, or too big for the memory budget, are
listed under `skipped` with the reason.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from rollout.simulation.calibration.config import StepShape, StepSweepConfig
from rollout.simulation.calibration.measure import Bench

__all__ = ["measure_steps", "step_row"]


def step_row(step: StepShape) -> dict[str, Any]:
    """The JSON row of `step`, without its time."""
    return {
        "kind": step.kind,
        "decode_batch": step.decode_batch,
        "decode_context": step.decode_context,
        "prefill_chunk": step.prefill_chunk,
        "prefill_prefix": step.prefill_prefix,
    }


def measure_steps(bench: Bench, sweep: StepSweepConfig) -> list[dict[str, Any]]:
    """Time every step of `sweep` in its order; the rows that were timed."""
    rows = []
    for step in sweep.shapes():
        row = step_row(step)
        if bench.timed_row(row, partial(bench.decoder.step, step)):
            rows.append(row)
    return rows
