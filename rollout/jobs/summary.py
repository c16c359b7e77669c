"""The headline numbers of a finished job's conductor (`rollout.observe.run_summary`)."""

from __future__ import annotations

from collections.abc import Sequence

from rollout.observe.run_summary import BatchDigest, RunSummary, summarize_run
from rollout.runtime.conductor import Conductor

__all__ = ["summarize_conductor_run"]


def summarize_conductor_run(
    policy: str,
    batches: Sequence[BatchDigest],
    conductor: Conductor,
    *,
    elapsed_s: float,
    busy_s: float | None,
) -> RunSummary:
    """`summarize_run` from what the conductor counted; `busy_s` is the engines' busy time
    summed (the busy fraction is over all of the conductor's engines)."""
    return summarize_run(
        policy,
        batches,
        origin_s=conductor.origin_s,
        elapsed_s=elapsed_s,
        busy_s=busy_s,
        engines=len(conductor.engine_counters),
        counters=conductor.engine_counters,
        dispatch=conductor.stats.dispatch,
    )
