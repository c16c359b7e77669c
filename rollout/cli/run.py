"""`conductor run [CONFIG] [key=value ...]`: the embedded default, end to end on one machine.

Scripted SWE agents play the model inside the simulated engine, which paces itself in wall-clock
time (or, with `engine_backend: sglang`, SGLang servers serve the model over HTTP); the shipped
SWE tasks run in real sandboxes (Docker when a daemon answers, else the local sandbox) through
the env pool; the conductor schedules; the simulated trainer consumes a few batches and
publishes weights. Leaves `runs/<timestamp>/` with trajectories, step events,
steps, engine time series, metrics and the report.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from foundation.errors import ConductorError
from rollout.cli.console import config_and_overrides, console, fail
from rollout.cli.run_dirs import new_run_dir
from rollout.cli.shutdown import Interrupted, run_until_signal
from rollout.errors import RolloutError
from rollout.jobs.checkpoint import (
    Checkpoint,
    prepare_resume,
    read_checkpoint,
    read_resume_info,
    write_resume_info,
)
from rollout.jobs.config import RunConfig
from rollout.jobs.run_job import RunResult, run_job
from rollout.jobs.run_plan import RunPlan, plan_run, plan_run_config
from rollout.observe.titles import busy_text, engine_title
from rollout.observe.trackers import RunTrackers, TrackerError, open_trackers
from rollout.trajectories.batch import Batch

__all__ = ["run"]

DEFAULT_RUN_CONFIG = Path(__file__).parents[2] / "configs/run/default.yaml"


def run(
    config: Path = typer.Argument(DEFAULT_RUN_CONFIG, help="run config (YAML)"),
    overrides: list[str] = typer.Argument(
        None,
        help="key=value overrides of any setting, e.g. steps=2 group_size=2 policy=sync "
        "pool.act_slots=4 engine.max_running_requests=8 (a dotted key walks into the file a "
        "setting names)",
    ),
    out: Path | None = typer.Option(None, help="parent of the run directory (default: out_dir)"),
    report: bool = typer.Option(True, help="write metrics.json and report.md in the run dir"),
    resume: Path | None = typer.Option(
        None,
        "--resume",
        help="continue the run in this run directory from its last checkpoint (after a crash, "
        "kill -9 or a signal), with the config it started with",
    ),
    metrics_port: int = typer.Option(
        0,
        "--metrics-port",
        min=0,
        max=65535,
        help="serve the scheduler's health metrics live for Prometheus on "
        "http://127.0.0.1:PORT/metrics during the run (0 = off)",
    ),
) -> None:
    """SWE rollouts in real sandboxes for a few training steps: scripted agents on the simulated
    engine (default), or SGLang servers over HTTP (configs/run/sglang.yaml). Every setting is
    resolved and checked before anything starts; the run directory keeps them all, each with
    its origin, in effective_config.yaml."""
    if resume is not None:
        if overrides or config != DEFAULT_RUN_CONFIG:
            fail("--resume takes the config the run started with; give no config or overrides")
        plan, run_dir, checkpoint = _resumed(resume)
        if plan is None:
            return
    else:
        plan, checkpoint = _planned(config, overrides), None
        run_dir = new_run_dir(out or Path(plan.config.out_dir))
        write_resume_info(run_dir, plan.config.model_dump(mode="json"), plan.base_dir)
    for note in plan.notes:
        console.print(f"[yellow]note:[/] {note}")
    if metrics_port:
        console.print(f"health metrics: http://127.0.0.1:{metrics_port}/metrics")
    try:
        trackers = open_trackers(plan.config.trackers, run_dir)
    except TrackerError as exc:
        fail(str(exc))
    try:
        result = _run_with_progress(plan, run_dir, checkpoint, metrics_port, report, trackers)
        if report:
            _write_report(run_dir)
            trackers.log_figures(run_dir / "plots")
    finally:
        trackers.close()
    console.print(_steps_table(result, plan))
    _print_totals(result)


def _planned(config: Path, overrides: list[str] | None) -> RunPlan:
    """The run's plan: every setting resolved and checked (before any run directory)."""
    config, extra = config_and_overrides(config, overrides, DEFAULT_RUN_CONFIG)
    try:
        plan = plan_run(config, extra)
        probe = getattr(plan.backend, "probe", None)
        if probe is not None:  # an engine that does not answer fails here, in seconds
            probe(plan.engine)
    except ConductorError as exc:
        fail(str(exc))
    return plan


def _resumed(run_dir: Path) -> tuple[RunPlan | None, Path, Checkpoint | None]:
    """The plan of the run in `run_dir`, cut back to its last checkpoint; None when the run
    is already complete."""
    try:
        settings, base_dir, checkpoint = _resume_settings(run_dir)
        plan = plan_run_config(settings, base_dir)
    except ConductorError as exc:
        fail(str(exc))
    done = 0 if checkpoint is None else checkpoint.steps_done
    if done >= settings.steps:
        console.print(f"{run_dir} is complete: {done} of {settings.steps} steps")
        return None, run_dir, checkpoint
    console.print(f"resuming {run_dir} after step {done} of {settings.steps}")
    return plan, run_dir, checkpoint


def _run_with_progress(
    plan: RunPlan,
    run_dir: Path,
    checkpoint: Checkpoint | None,
    metrics_port: int,
    report: bool,
    trackers: RunTrackers,
) -> RunResult:
    """The run under a progress bar; a signal or a known failure ends it with one line."""

    def announce(backend: str) -> None:
        if backend != "docker":
            console.print("[yellow]no Docker engine: using the local sandbox (NOT isolated)[/]")

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("training steps", total=plan.config.steps)
        progress.update(bar, completed=0 if checkpoint is None else checkpoint.steps_done)

        def advance(batch: Batch) -> None:
            trackers.log_step(batch)
            waited = f"training steps (waited {batch.wait_s:.0f} s)"
            progress.update(bar, advance=1, description=waited)

        def stopping(signum: int) -> None:
            progress.stop()
            console.print(
                f"[yellow]{signal.Signals(signum).name}: stopping (aborting generations, "
                "removing containers, flushing files); send it again to exit at once[/]"
            )

        try:
            return run_until_signal(
                lambda: run_job(
                    plan,
                    run_dir,
                    on_batch=advance,
                    on_backend=announce,
                    resume_from=checkpoint,
                    metrics_port=metrics_port,
                    keep_batches=False,  # outlines only: a long run's memory stays flat
                ),
                stopping,
                stop_timeout_s=plan.config.watchdog.stop_timeout_s,
            )
        except Interrupted as stopped:
            console.print(
                f"{stopped}: the steps completed so far are in {run_dir}; no container of this "
                f"run is left. Continue it with `conductor run --resume {run_dir}`"
            )
            if report:
                _write_report(run_dir)
            raise typer.Exit(stopped.exit_code) from None
        except ConductorError as exc:
            with contextlib.suppress(OSError):
                run_dir.rmdir()  # only if nothing was written into it
            hint = f"; continue it with `conductor run --resume {run_dir}`"
            fail(f"{exc}{hint if run_dir.exists() else ''}")


def _resume_settings(run_dir: Path) -> tuple[RunConfig, Path, Checkpoint | None]:
    """The config a run started with, where its paths resolve, and its last checkpoint; the
    run directory is cut back to that checkpoint (`prepare_resume`)."""
    config, base_dir = read_resume_info(run_dir)
    try:
        settings = RunConfig.model_validate(config)
    except ValidationError as exc:
        raise RolloutError(f"{run_dir}: the run's config no longer validates: {exc}") from exc
    checkpoint = read_checkpoint(run_dir)
    prepare_resume(run_dir, checkpoint)
    return settings, base_dir, checkpoint


def _steps_table(result: RunResult, plan: RunPlan) -> Table:
    settings = plan.config
    engine = engine_title(plan.backend.name)
    table = Table(
        title=(
            f"conductor run: policy {plan.policy.name}, B={settings.groups_per_step}, "
            f"K={settings.group_size}, {result.backend} sandboxes, {engine}"
        )
    )
    for column in ("step", "T_next", "trainer wait", "staleness", "mean reward", "rewards"):
        table.add_column(column, justify="right" if column != "rewards" else "left")
    for step, t_next in zip(result.steps, result.summary.t_next_s, strict=True):
        mean = step.rewards_mean
        rewards = " | ".join(
            " ".join(_reward_text(reward, error) for reward, error in group)
            for group in step.rewards
        )
        table.add_row(
            str(step.step),
            f"{t_next:.1f} s",
            f"{step.wait_s:.1f} s",
            ",".join(str(value) for value in step.staleness),
            "—" if mean is None else f"{mean:.2f}",
            rewards,
        )
    return table


def _reward_text(reward: float | None, infra_error: str | None) -> str:
    if infra_error is not None:
        return "x"
    return "?" if reward is None else f"{reward:g}"


def _print_totals(result: RunResult) -> None:
    summary = result.summary
    console.print(
        f"{len(result.steps)} steps in {result.elapsed_s:.1f} s; mean T_next "
        f"{summary.mean_t_next_s:.1f} s; {summary.samples} samples consumed "
        f"({summary.infra_failures} with infra errors, shown as x); "
        f"{summary.preemptions} preemptions, {summary.interruptions} interruptions; "
        f"{busy_text(summary.busy_fraction)}"
    )
    console.print(f"run directory: [bold]{result.run_dir}[/]")


def _write_report(run_dir: Path) -> None:
    try:
        from rollout.observe.report import write_report
    except ImportError:
        console.print("[yellow]note:[/] rollout.observe.report is not installed; no report written")
        return
    try:
        path = write_report(run_dir)
    except RolloutError as exc:
        console.print(f"[yellow]note:[/] no report: {exc}")
        return
    console.print(f"report: [bold]{path}[/]")
