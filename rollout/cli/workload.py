"""`conductor workload show`: what a synthetic workload's trajectories look like, before a run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer
from rich.table import Table

from foundation.config import load_config
from foundation.errors import ConductorError
from rollout.cli.console import console, fail
from rollout.simulation.workload import SampleScript, SyntheticWorkload, WorkloadConfig
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
    groups_per_step: int = typer.Option(
        4, min=1, help="groups per training step (B): a drifting workload's step is index // B"
    ),
    seeds: str = typer.Option("0", help="comma-separated seeds; their groups are pooled"),
) -> None:
    """Per-trajectory context statistics: first and final context, growth, turns (tokens);
    for a workload with `drift`, one row per training step too."""
    try:
        workload = load_config(
            WorkloadConfig,
            config,
            [*(overrides or []), f"group_size={group_size}", f"groups_per_step={groups_per_step}"],
        )
        seed_list = [int(seed) for seed in seeds.split(",") if seed.strip()]
    except (ConductorError, ValueError) as exc:
        fail(str(exc))
    if not seed_list:
        fail("give at least one seed, e.g. --seeds 0,1")
    drawn = [SyntheticWorkload(workload, seed) for seed in seed_list]
    by_group = [[s for each in drawn for s in each.group(index)] for index in range(groups)]
    stats = context_stats(s for scripts in by_group for s in scripts)
    title = (
        f"workload {workload.name}: {groups} groups × {group_size}, seeds {seeds} "
        f"({stats.samples} trajectories)"
    )
    console.print(_table(title, stats))
    if workload.drift is not None:
        console.print(_steps_table(by_group, groups_per_step))


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


def _steps_table(by_group: Sequence[Sequence[SampleScript]], groups_per_step: int) -> Table:
    """One row per training step (B groups each): how the trajectories drift."""
    table = Table(title=f"per training step (B = {groups_per_step} groups)")
    for column in ("step", "turns mean", "output tokens mean", "final context mean"):
        table.add_column(column, justify="right")
    for start in range(0, len(by_group), groups_per_step):
        scripts = [s for group in by_group[start : start + groups_per_step] for s in group]
        stats = context_stats(scripts)
        output = sum(s.total_output_tokens for s in scripts) / len(scripts)
        table.add_row(
            str(start // groups_per_step),
            f"{stats.turns_mean:.1f}",
            f"{output:,.0f}",
            f"{stats.final_context_mean:,.0f}",
        )
    return table
