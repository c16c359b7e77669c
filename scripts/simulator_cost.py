"""What each simulated run costs in CPU, and a digest of what it computed (SIMULATED).

    .venv/bin/python scripts/simulator_cost.py CONFIG [OVERRIDES ...] \
        [--policies conductor,traj_async] [--seeds 0] [--engine]

Runs the config's policies (or those named) one at a time in this process and prints, per run,
the CPU seconds it took, its mean T_next and a digest of its whole `RunSummary`. A change meant
only to make the simulator cheaper must leave every digest as it was (issue 27: "results
byte-identical"): run this before and after, on a KV-tight cell and a growth cell at least, e.g.

    .venv/bin/python scripts/simulator_cost.py configs/simulate/growth.yaml groups_per_step=16
    .venv/bin/python scripts/simulator_cost.py configs/simulate/swe_like.yaml \
        model.path=../model/qwen3_32b_h200.yaml 'policies=[conductor,traj_async,kv_throttle]'

CPU time, not wall time, is the figure (these machines are noisy); compare two versions side by
side in one sitting, and expect ±3 % between repeats of the same run.

`--engine` adds, per run, where the simulated engine's time went (virtual seconds, SIMULATED):
its busy time, the share of it in prefill (or mixed) steps, decode steps and the mean decode
batch, prefilled tokens and the recomputed ones among them, and the time the host-to-device
link was busy loading KV back; and Σ T_next against the floor of the consumed samples, part by
part, each as a fraction of the floor (`rollout.simulation.floor_gap`): the forwards' fixed
cost beyond the floor's, per-token work beyond the consumed samples' once-over, and idle.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

from rollout.engines.base import EngineStats
from rollout.jobs.bench_rollout import plan_runs, simulate_planned
from rollout.observe.run_summary import FloorGap, RunSummary


def summary_digest(summary: RunSummary) -> str:
    """A short digest of every field of `summary` (floats by their exact repr)."""
    return hashlib.sha256(repr(summary).encode()).hexdigest()[:16]


def engine_time_line(stats: Sequence[EngineStats], summary: RunSummary) -> str:
    """Where the engines' time went, summed over them (the simulator's counters, SIMULATED)."""

    def total(key: str) -> float:
        return sum(float(engine.extra.get(key, 0.0)) for engine in stats)

    busy_s = total("busy_s")
    steps = total("decode_steps")
    return (
        f"    engine busy {busy_s:,.1f} s, prefill {total('prefill_busy_s') / busy_s:.1%} of it"
        f" | decode steps {steps:,.0f}, batch {total('decode_tokens') / steps:.1f}"
        f" | prefilled {total('prefill_tokens'):,.0f} tokens, recomputed "
        f"{summary.recomputed_tokens:,} ({summary.recomputed_after_update_tokens:,} after "
        f"updates) | H2D busy {total('h2d_busy_s'):,.1f} s"
        if busy_s > 0 and steps > 0
        else "    the engines did no work"
    )


def floor_gap_line(gap: FloorGap) -> str:
    """Σ T_next against the consumed samples' floor, part by part (SIMULATED)."""
    forwards, extra, idle = gap.parts_of_floor
    return (
        f"    Σ T_next {gap.elapsed_s:,.1f} s = floor {gap.floor_s:,.1f} s × (1 + forwards "
        f"{forwards:.3f} + extra work {extra:.3f} + idle {idle:.3f})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("config", type=Path, help="simulate config (configs/simulate/*.yaml)")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the config")
    parser.add_argument("--policies", default="", help="only these, comma-separated")
    parser.add_argument("--seeds", default="0", help="seeds, comma-separated")
    parser.add_argument(
        "--engine", action="store_true", help="also print where the engine's time went"
    )
    args = parser.parse_args(argv)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    only = {name for name in args.policies.split(",") if name}
    planned = plan_runs(
        args.config, args.overrides, seeds, variants=(), record_dir=None, config_policies=True
    )
    unknown = only - {run.name for run in planned}
    if unknown:
        parser.error(f"the config has no policy {', '.join(sorted(unknown))} (--policies)")
    runs = [run for run in planned if not only or run.name in only]
    total_s = 0.0
    for run in runs:
        start_s = time.process_time()
        outcome = simulate_planned(run)
        cpu_s = time.process_time() - start_s
        summary = outcome.summary
        total_s += cpu_s
        print(
            f"seed {run.seed} {run.name:<20} CPU {cpu_s:7.2f} s  T_next "
            f"{summary.mean_t_next_s:10.3f} s  digest {summary_digest(summary)}",
            flush=True,
        )
        if args.engine:
            print(engine_time_line(outcome.engine_stats, summary), flush=True)
            if summary.floor_gap is not None:
                print(floor_gap_line(summary.floor_gap), flush=True)
    print(f"{len(runs)} runs, CPU {total_s:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
