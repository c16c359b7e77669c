"""`conductor trace`: turn a run into a replayable workload trace, summarise a trace, and export
a run as a Chrome / Perfetto trace to look at (`export`)."""

from __future__ import annotations

import statistics
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from rollout.cli.console import console, fail
from rollout.observe.run_records import MissingRunFileError
from rollout.observe.trace_export import export_run_trace
from rollout.simulation.workload.trace import TraceError, load_trace, trace_from_run, write_trace

__all__ = ["app"]

app = typer.Typer(
    help="Workload traces: per-sample scripts that `conductor simulate` and `conductor bench "
    "rollout` replay instead of drawing from distributions (workload field `trace`); and "
    "`export`: a run as a Chrome / Perfetto trace.",
    no_args_is_help=True,
)


@app.command("convert")
def convert(
    run_dir: Path = typer.Argument(..., help="run directory (holds trajectories.jsonl)"),
    out: Path = typer.Option(
        None, "--out", "-o", help="trace file to write (default: RUN_DIR/trace.jsonl)"
    ),
) -> None:
    """Write the consumed samples of a run as a JSONL trace (turn lengths, tools, latencies).

    Replay it with: conductor simulate CONFIG 'workload.overrides=[trace=FILE]' group_size=K
    """
    target = out or run_dir / "trace.jsonl"
    try:
        samples = trace_from_run(run_dir)
        written = write_trace(samples, target)
        trace = load_trace(target)
    except TraceError as exc:
        fail(str(exc))
    console.print(
        f"{written} samples in {len(trace.groups)} groups of {trace.group_size} written to "
        f"[bold]{target}[/]"
    )
    replay = f"conductor simulate CONFIG 'workload.overrides=[trace={target}]' "
    console.print("replay: " + escape(replay + f"group_size={trace.group_size}"))


@app.command("export")
def export(
    run_dir: Path = typer.Argument(..., help="run directory (holds events.jsonl)"),
    out: Path = typer.Option(
        None, "--out", "-o", help="trace file to write (default: RUN_DIR/trace.json)"
    ),
) -> None:
    """Write the run as Chrome trace-event JSON: a track per sample (generate, tool, pre_act,
    grading), per engine (generations, load counters) and per env host (acquires, tools).

    Open it in ui.perfetto.dev (Open trace file) or chrome://tracing.
    """
    if not run_dir.is_dir():
        fail(f"{run_dir} is not a run directory")
    try:
        target = export_run_trace(run_dir, out)
    except (MissingRunFileError, OSError) as exc:
        fail(str(exc))
    console.print(f"trace written to [bold]{target}[/]: open it in ui.perfetto.dev")


@app.command("show")
def show(trace_file: Path = typer.Argument(..., help="trace file (JSONL or Parquet)")) -> None:
    """Summarise a trace: groups, samples, turns, tokens, tool time, rewards."""
    try:
        trace = load_trace(trace_file)
    except TraceError as exc:
        fail(str(exc))
    samples = [sample for group in trace.groups for sample in group]
    turns = [len(sample.turns) for sample in samples]
    output = [sum(turn.output_tokens for turn in sample.turns) for sample in samples]
    context = [
        sample.prompt_tokens + sum(t.output_tokens + t.observation_tokens for t in sample.turns)
        for sample in samples
    ]
    tool_s = [sum(turn.latency_s for turn in sample.turns) for sample in samples]
    table = Table(title=f"trace {trace_file.name}: {len(trace.groups)} groups × {trace.group_size}")
    for column in ("per sample", "median", "mean", "max"):
        table.add_column(column, justify="left" if column == "per sample" else "right")
    for name, values in (
        ("turns", turns),
        ("generated tokens", output),
        ("final context tokens", context),
        ("tool time (s)", tool_s),
        ("reward", [sample.reward for sample in samples]),
    ):
        table.add_row(
            name,
            f"{statistics.median(values):,.1f}",
            f"{statistics.fmean(values):,.1f}",
            f"{max(values):,.1f}",
        )
    console.print(table)
