"""`conductor workload show`: what a synthetic workload's trajectories look like, before a run."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from foundation.config import load_config
from foundation.errors import ConductorError
from rollout.cli.console import console, fail
from rollout.simulation.workload import SyntheticWorkload, WorkloadConfig
from rollout.simulation.workload.context_stats import ContextStats, context_stats

__all__ = ["app"]

app = typer.Typer(
    help="Synthetic workloads (configs/workload/*.yaml): the trajectories they draw.",
    no_args_is_help=True,
)


@app.command("show")
def show(
    config: Path = typer.Argument(
        ..., help="workload config (YAML), e.g. configs/workload/growth.yaml"
    ),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. turns.median=20"),
    groups: int = typer.Option(64, min=1, help="groups drawn per seed"),
    group_size: int = typer.Option(8, min=1, help="samples per group (K)"),
    seeds: str = typer.Option("0", help="comma-separated seeds; their groups are pooled"),
) -> None:
    """Per-trajectory context statistics: first and final context, growth, turns (tokens)."""
    try:
        workload = load_config(
            WorkloadConfig, config, [*(overrides or []), f"group_size={group_size}"]
        )
        seed_list = [int(seed) for seed in seeds.split(",") if seed.strip()]
    except (ConductorError, ValueError) as exc:
        fail(str(exc))
    if not seed_list:
        fail("give at least one seed, e.g. --seeds 0,1")
    scripts = [
        script
        for seed in seed_list
        for drawn in [SyntheticWorkload(workload, seed)]
        for index in range(groups)
        for script in drawn.group(index)
    ]
    stats = context_stats(scripts)
    title = (
        f"workload {workload.name}: {groups} groups × {group_size}, seeds {seeds} "
        f"({stats.samples} trajectories)"
    )
    console.print(_table(title, stats))


def _table(title: str, stats: ContextStats) -> Table:
    table = Table(title=title)
    table.add_column("per trajectory")
    table.add_column("value", justify="right")
    rows = (
        ("first-turn context, mean (tokens)", f"{stats.first_context_mean:,.0f}"),
        ("final context, mean (tokens)", f"{stats.final_context_mean:,.0f}"),
        ("final context, p50 / p90 (tokens)",
         f"{stats.final_context_p50:,.0f} / {stats.final_context_p90:,.0f}"),
        ("growth final ÷ first, mean / p90", f"{stats.growth_mean:.2f}× / {stats.growth_p90:.2f}×"),
        ("mean final ÷ mean first", f"{stats.growth_of_means:.2f}×"),
        ("turns, mean / p50 / p90 / max",
         f"{stats.turns_mean:.1f} / {stats.turns_p50:.0f} / {stats.turns_p90:.0f} / "
         f"{stats.turns_max}"),
        ("truncated by the context limit", f"{stats.truncated_share:.1%}"),
    )  # fmt: skip
    for name, value in rows:
        table.add_row(name, value)
    return table
