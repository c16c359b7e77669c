"""Weak scaling of the simulated cluster (SIMULATED): T_next and busy fraction at N engines.

    .venv/bin/python scripts/weak_scaling.py [key=value ...] [--config CONFIG]
        [--engines 1,8,64] [--markdown FILE]

CONFIG (default configs/simulate/cluster_weak.yaml) is the per-engine unit; each run
multiplies its groups_per_step, cluster.engines and cluster.env_nodes by N, so the work per
engine is fixed (`rollout.jobs.bench_rollout.run_weak_scaling`). Prints a Markdown table with
each run's wall time (this machine's seconds, printed on stderr as each run ends too) and the
cost-model parameters; `--markdown` also appends it to FILE.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rollout.jobs.bench_rollout import (
    WEAK_SCALING_COLUMNS,
    markdown_table,
    run_weak_scaling,
    weak_scaling_notes,
    weak_scaling_rows,
)

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="the per-engine unit (simulate config)",
                        default=ROOT / "configs/simulate/cluster_weak.yaml")  # fmt: skip
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the unit")
    parser.add_argument("--engines", default="1,8,64", help="cluster sizes, comma-separated")
    parser.add_argument("--markdown", type=Path, help="also append the table to this file")
    args = parser.parse_args()
    counts = [int(part) for part in args.engines.split(",") if part.strip()]
    simulation, rows = run_weak_scaling(
        args.config,
        args.overrides,
        counts,
        progress=lambda line: print(f"running: {line}", file=sys.stderr, flush=True),
    )
    for row in rows:
        print(f"{row.engines} engines: {row.wall_s:.1f} s wall", file=sys.stderr)
    title = (
        f"Weak scaling (SIMULATED): {args.config.name}, {', '.join(map(str, counts))} engines "
        f"{' '.join(args.overrides)}".rstrip()
    )
    table = markdown_table(
        title, WEAK_SCALING_COLUMNS, weak_scaling_rows(rows), weak_scaling_notes(simulation)
    )
    print(table)
    if args.markdown is not None:
        with args.markdown.open("a", encoding="utf-8") as out:
            out.write(table)


if __name__ == "__main__":
    main()
