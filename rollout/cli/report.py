"""`conductor report RUN_DIR`: write metrics.json, report.md and plots; print the summary."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from foundation.config import load_config
from foundation.errors import ConfigError
from rollout.cli.console import console, fail
from rollout.errors import RolloutError

__all__ = ["report"]

DEFAULT_REPORT_CONFIG = Path(__file__).parents[2] / "configs/report/default.yaml"


def report(
    run_dir: Path = typer.Argument(..., help="run directory (the folder holding steps.jsonl)"),
    config: Path = typer.Option(DEFAULT_REPORT_CONFIG, help="plot config (YAML)"),
    overrides: list[str] = typer.Option(
        None, "--set", help="key=value overrides of the plot config, e.g. --set dpi=150"
    ),
) -> None:
    """Summarise a finished (or running) rollout: T_next, E_rollout, GPU busy, KV, staleness."""
    # Imported here so that other sub-commands do not pay for loading matplotlib.
    from rollout.observe.plots import PlotConfig
    from rollout.observe.report import generate_report

    try:
        plot_config = load_config(PlotConfig, config, overrides or [])
        written = generate_report(run_dir, plot_config)
    except (RolloutError, ConfigError) as exc:
        fail(str(exc))
    table = Table(title=f"run {run_dir.name}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for row in written.metrics.summary_rows():
        table.add_row(row.name, row.text)
    console.print(table)
    for warning in written.integrity.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}")
    console.print(f"report written to [bold]{written.report_path}[/]")
