"""`conductor simulate CONFIG [key=value ...]`: every policy on the same simulated workload.

Each policy runs N training steps in virtual time (`rollout.simulation.vtime.run_virtual`)
with the same workload, engine, model and seed, writes its own run directory (and report, when
`rollout.observe.report` is installed), and the command prints one table side by side with the ratio
of each baseline to ours. The results are SIMULATED: the table says so and lists the cost
model it used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from foundation.errors import ConductorError
from rollout.cli.console import config_and_overrides, console, fail
from rollout.cli.run_dirs import new_run_dir
from rollout.errors import RolloutError
from rollout.jobs.simulation import PolicyRun, simulate_policy
from rollout.jobs.simulation_plan import Simulation, plan_simulation
from rollout.observe.run_summary import RunSummary
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.batch import Batch

__all__ = ["simulate", "summary_table"]

DEFAULT_SIMULATE_CONFIG = Path(__file__).parents[2] / "configs/simulate/swe_like.yaml"


def simulate(
    config: Path = typer.Argument(DEFAULT_SIMULATE_CONFIG, help="simulate config (YAML)"),
    overrides: list[str] = typer.Argument(
        None, help="key=value overrides, e.g. groups_per_step=2 steps=2 policies=[conductor,sync]"
    ),
    out: Path | None = typer.Option(None, help="parent of the run directories (default: out_dir)"),
    report: bool = typer.Option(True, help="write metrics.json and report.md in each run dir"),
    metrics_port: int = typer.Option(
        0,
        "--metrics-port",
        min=0,
        max=65535,
        help="serve the running policy's health metrics live for Prometheus on "
        "http://127.0.0.1:PORT/metrics (one policy after another; times and rates in virtual "
        "seconds; 0 = off)",
    ),
) -> None:
    """Compare rollout policies on one simulated workload (virtual time, same seed)."""
    config, extra = config_and_overrides(config, overrides, DEFAULT_SIMULATE_CONFIG)
    try:
        simulation = plan_simulation(config, extra)
    except ConductorError as exc:
        fail(str(exc))
    settings, policies = simulation.config, simulation.policies
    root = new_run_dir(out or Path(settings.out_dir))
    console.print(_cost_model_text(simulation))
    if metrics_port:
        console.print(f"health metrics (virtual time): http://127.0.0.1:{metrics_port}/metrics")
    runs: list[PolicyRun] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        for policy in policies:
            bar = progress.add_task(f"{policy.name:<12} training steps", total=settings.steps)

            def advance(_batch: Batch, bar: TaskID = bar) -> None:
                progress.advance(bar)

            try:
                run = run_virtual(
                    simulate_policy(
                        simulation,
                        policy,
                        run_dir=root / policy.name,
                        on_batch=advance,
                        metrics_port=metrics_port,
                    )
                )
            except RolloutError as exc:
                fail(f"policy {policy.name}: {exc}")
            runs.append(run)
    if report:
        for run in runs:
            _write_report(run)
    console.print(summary_table([run.summary for run in runs], simulation))
    backends = ", ".join(f"{run.summary.policy} {run.kv_backend}" for run in runs)
    console.print(f"KV backend per policy: {backends}")
    console.print(f"run directories: [bold]{root}[/]")


def summary_table(summaries: Sequence[RunSummary], simulation: Simulation) -> Table:
    """Policies side by side; each baseline's ratio to the first policy ("ours")."""
    config = simulation.config
    title = (
        f"SIMULATED ({_workload_label(simulation)}, {config.steps} steps, "
        f"B={config.groups_per_step}, K={config.group_size}, seed {config.seed}) — "
        "virtual time on a cost model, not a measurement"
    )
    caption = f"÷ ours: the baseline's value divided by {ours_name(summaries)}'s"
    table = Table(title=title, caption=caption)
    table.add_column("metric")
    ours = summaries[0]
    for summary in summaries:
        table.add_column(summary.policy, justify="right")
        if summary is not ours:
            table.add_column("÷ ours", justify="right")
    for label, value, fmt in _rows(config.steps):
        cells = []
        for summary in summaries:
            cells.append(fmt(value(summary)))
            if summary is not ours:
                cells.append(_ratio(value(summary), value(ours)))
        table.add_row(label, *cells)
    return table


_Value = Callable[[RunSummary], float | None]
_Format = Callable[[float | None], str]


def _seconds(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:,.1f} s"


def _fraction(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def ours_name(summaries: Sequence[RunSummary]) -> str:
    """The policy the ratios refer to: the first one."""
    return summaries[0].policy


def _rows(steps: int) -> list[tuple[str, _Value, _Format]]:
    def step(index: int) -> _Value:
        return lambda s: s.t_next_s[index] if index < len(s.t_next_s) else None

    rows: list[tuple[str, _Value, _Format]] = [
        (f"T_next step {k + 1}", step(k), _seconds) for k in range(steps)
    ]
    rows += [
        ("T_next mean", lambda s: s.mean_t_next_s, _seconds),
        ("trainer wait mean", lambda s: s.mean_trainer_wait_s, _seconds),
        ("E_rollout", lambda s: s.e_rollout, _fraction),
        ("engine busy fraction", lambda s: s.busy_fraction, _fraction),
        ("KV hit rate", lambda s: s.kv_hit_rate, _fraction),
        ("recomputed tokens", lambda s: s.recomputed_tokens, _count),
        ("preemptions", lambda s: s.preemptions, _count),
        ("interruptions", lambda s: s.interruptions, _count),
        ("mean reward", lambda s: s.rewards_mean, _fraction),
    ]
    return rows


def _ratio(value: float | None, reference: float | None) -> str:
    if value is None or reference is None or math.isnan(value) or math.isnan(reference):
        return "—"
    return "—" if reference == 0 else f"{value / reference:.2f}×"


def _cost_model_text(simulation: Simulation) -> str:
    model, engine, cost = simulation.model, simulation.engine, simulation.model.cost
    kv_tokens = model.kv_capacity_tokens(engine.page_tokens)
    return (
        "[bold]SIMULATED results[/] (virtual time; cost model, not hardware)\n"
        f"  model {model.name} on {model.gpu.name}: KV pool {kv_tokens:,} tokens, "
        f"{model.kv_bytes_per_token:,} B/token\n"
        f"  step time = t_fix {cost.t_fix_s:g} s + max(t_weights {cost.t_weights_s:g} s, "
        f"N·b_c {cost.b_c_s:g} s) + N·b_tok {cost.b_tok_s:g} s + c_dec {cost.c_dec_s:g} s·ΣL "
        f"+ c_pf {cost.c_pf_s:g} s·Σn(p+n/2)\n"
        f"  engine: max_running_requests {engine.max_running_requests}, page "
        f"{engine.page_tokens} tokens, chunked prefill {engine.chunked_prefill_tokens}, host "
        f"tier {'x' + str(engine.host.ratio) if engine.host.enabled else 'off'}, PCIe "
        f"{engine.link.h2d_gb_per_s:g} GB/s\n"
        f"  workload {_workload_label(simulation)}; trainer step "
        f"{simulation.config.trainer.train_time_s:g} s; async_factor "
        f"{simulation.config.async_factor}"
    )


def _workload_label(simulation: Simulation) -> str:
    """The workload's name, or a mixed run's sources (name weight class)."""
    if not simulation.sources:
        return simulation.workload.name
    parts = (
        f"{s.config.name} {s.config.weight:g} {s.config.priority_class}" for s in simulation.sources
    )
    return "mixed: " + ", ".join(parts)


def _write_report(run: PolicyRun) -> None:
    if run.run_dir is None:
        return
    try:
        from rollout.observe.report import write_report
    except ImportError:
        console.print("[yellow]note:[/] rollout.observe.report is not installed; no report written")
        return
    try:
        write_report(run.run_dir)
    except RolloutError as exc:
        console.print(f"[yellow]note:[/] no report for {run.summary.policy}: {exc}")
