"""Where each step's engine time went, per policy run (an estimate; SIMULATED runs).

    .venv/bin/python scripts/step_work_split.py RUN_DIR [RUN_DIR ...] [--markdown FILE]

For each run directory of `conductor simulate` (or of `conductor bench rollout --figures DIR`,
under DIR/runs/), prints per training step its duration and the estimated engine seconds spent
on the groups that step consumed, on groups a later step consumed, and on groups no step
consumed (`rollout.observe.step_work`: each request priced on the run's cost model, a step's
fixed time shared over the mean batch the engine ran during that step). A policy that
finishes a step sooner without consuming cheaper groups puts more of the step on its own
groups, or wastes less.
"""

from __future__ import annotations

import argparse
import bisect
from pathlib import Path

import yaml

from rollout.engines.sim.cost_model import CostModelConfig
from rollout.observe.run_dir import RunDir, read_jsonl_records
from rollout.observe.step_work import StepWork, step_work


def _mean_batches(run: RunDir, ends: list[float]) -> list[float]:
    """Mean running requests of each step window (samples with an idle engine left out)."""
    sums, counts = [0.0] * len(ends), [0] * len(ends)
    for record in read_jsonl_records(run.timeseries_path):
        index = bisect.bisect_left(ends, record.get("t_s", 0.0))
        if index < len(ends) and record.get("running", 0) > 0:
            sums[index] += float(record["running"])
            counts[index] += 1
    return [total / count if count else 1.0 for total, count in zip(sums, counts, strict=True)]


def split(path: Path) -> tuple[list[StepWork], list[float]]:
    """The run's per-step split and the mean batch of each step."""
    run = RunDir(path)
    config = yaml.safe_load(run.config_path.read_text(encoding="utf-8"))
    if "model" not in config or "cost" not in config["model"]:
        raise SystemExit(f"{path}: its config.yaml has no model cost (a `conductor simulate` run?)")
    cost = CostModelConfig(**config["model"]["cost"])
    steps = run.read_steps()
    batches = _mean_batches(run, [step.t_s for step in steps])
    return step_work(steps, run.read_events(), cost, batches=batches), batches


def table(path: Path) -> str:
    rows, batches = split(path)
    lines = [
        f"**{path}** (estimated engine seconds)",
        "",
        "| step | duration | mean batch | on its own groups | on later steps' "
        "| on never consumed | own share |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row, batch in zip(rows, batches, strict=True):
        lines.append(
            f"| {row.step} | {row.duration_s:,.0f} s | {batch:.1f} | {row.own_s:,.0f} s "
            f"| {row.later_s:,.0f} s | {row.unconsumed_s:,.0f} s | {row.own_share:.0%} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument("--markdown", type=Path, help="also append the tables to this file")
    args = parser.parse_args()
    text = "\n".join(table(path) for path in args.runs)
    print(text)
    if args.markdown:
        with args.markdown.open("a", encoding="utf-8") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
