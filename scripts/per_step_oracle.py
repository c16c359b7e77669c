"""How much a knob retuned at every step could gain over its best fixed value (SIMULATED).

    .venv/bin/python scripts/per_step_oracle.py CONFIG [OVERRIDES ...] \
        --sweep traj_async:conductor.agent_slots=4,8,12,16,20,24 --seeds 0,1,2 [--markdown FILE]

Runs `--ours` and the sweep's variants on every seed (as `conductor bench rollout` does)
and reports, per seed: ours' mean T_next, the best *fixed* variant's, and the
**per-step oracle**: every step's T_next taken from whichever variant was fastest on that step,
in hindsight. The oracle switches for free and ignores that a step's state depends on the steps
before it, so it is an optimistic estimate of what any policy that only adapts this one knob
over training steps could reach: where it is close to the best fixed value, a win over that
value has to come from somewhere else than retuning the knob (issue 27's drift target).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rollout.jobs.bench_rollout import SeedSpread, parse_sweep, run_seeds
from rollout.observe.run_summary import RunSummary


def oracle_row(seed: int, ours: RunSummary, variants: Sequence[tuple[str, RunSummary]]) -> str:
    """One seed's Markdown row: ours, the best fixed variant, the per-step oracle."""
    best_label, best = min(variants, key=lambda item: item[1].mean_t_next_s)
    steps = len(best.t_next_s)
    winners = [  # (T_next, order, label) of each step's fastest variant; a tie: the first
        min((run.t_next_s[step], order, label) for order, (label, run) in enumerate(variants))
        for step in range(steps)
    ]
    oracle = sum(t_next for t_next, _, _ in winners) / steps
    picks = [label.split("=")[-1].rstrip("]") for _, _, label in winners]  # the swept value
    return (
        f"| {seed} | {ours.mean_t_next_s:,.1f} s | {best.mean_t_next_s:,.1f} s ({best_label}) "
        f"| {oracle:,.1f} s | {best.mean_t_next_s / oracle:.3f}× "
        f"| {best.mean_t_next_s / ours.mean_t_next_s:.3f}× | {' '.join(picks)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--sweep", required=True, help="POLICY:KEY=V1,V2,... (as bench rollout)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--ours", default="conductor", help="the policy the oracle is set against")
    parser.add_argument("--markdown", type=Path, help="also append the table to this file")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (one per core)")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    variants = parse_sweep(args.sweep)
    results: list[SeedSpread] = run_seeds(
        args.config,
        [*args.overrides, f"policies=[{args.ours}]"],
        seeds,
        variants=variants,
        progress=lambda text: print(text, flush=True),
        jobs=args.jobs,
    )
    by_name = {result.policy: result.summaries for result in results}
    lines = [
        f"SIMULATED ({args.config.name} {' '.join(args.overrides)}; sweep {args.sweep})",
        "",
        "| seed | ours | best fixed | per-step oracle | best fixed ÷ oracle | best fixed ÷ ours "
        "| oracle's pick per step |",
        "|---|---|---|---|---|---|---|",
    ]
    for index, seed in enumerate(seeds):
        swept = [(variant.label, by_name[variant.label][index]) for variant in variants]
        lines.append(oracle_row(seed, by_name[args.ours][index], swept))
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with args.markdown.open("a") as out:
            out.write(text + "\n\n")


if __name__ == "__main__":
    main()
