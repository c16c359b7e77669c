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
    busy_s: float,
) -> RunSummary:
    """`summarize_run` over one engine's run, from what the conductor counted."""
    return summarize_run(
        policy,
        batches,
        origin_s=conductor.origin_s,
        elapsed_s=elapsed_s,
        busy_s=busy_s,
        engines=1,
        counters=conductor.engine_counters,
        dispatch=conductor.stats.dispatch,
    )
