"""`conductor bench ...`: side-by-side benchmarks that report ratios."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from foundation.errors import ConductorError
from harness.bench import EnvBenchConfig, run_env_bench, summarize
from harness.images import ensure_base_image
from harness.sandbox.docker import docker_client
from rollout.cli.console import console, fail

if TYPE_CHECKING:
    from rollout.jobs.bench_rollout import SeedSpread, Variant
    from rollout.observe.bench_plots import BenchFigureConfig

__all__ = ["app"]

DEFAULT_BENCH_FIGURES_CONFIG = Path(__file__).parents[2] / "configs/report/bench.yaml"

app = typer.Typer(help="Benchmarks (compare side by side in one run).", no_args_is_help=True)


@app.command("env")
def bench_env(
    acquires: int = typer.Option(20, help="acquires measured, cold and warm each"),
    exec_repeats: int = typer.Option(30, help="commands timed for the exec overhead"),
    actions_per_env: int = typer.Option(10, help="actions per env in the throughput runs"),
) -> None:
    """Cold vs warm acquire, exec overhead vs raw `docker exec`, actions/s at 1, 8, 32 envs."""
    try:
        client = docker_client()
        image = ensure_base_image(client, progress=console.print)
        config = EnvBenchConfig(
            acquires=acquires, exec_repeats=exec_repeats, actions_per_env=actions_per_env
        )
        with console.status("benchmarking") as status:
            result = asyncio.run(
                run_env_bench(client, image, config, progress=lambda line: status.update(line))
            )
    except ConductorError as exc:
        fail(str(exc))
    table = Table(title=f"env pool benchmark (image {image}, command `{config.command}`)")
    for column in ("measure", "p50", "p99", "comparison"):
        table.add_column(column)
    for row in summarize(result):
        table.add_row(*row)
    console.print(table)


@app.command("engine")
def bench_engine(
    sessions: str = typer.Option(
        "1,64,256", help="concurrent sessions to measure, comma-separated"
    ),
    turns: int = typer.Option(8, help="turns per session (the prompt grows each turn)"),
    prompt_tokens: int = typer.Option(2048, help="first prompt of each session (tokens)"),
    cost: str = typer.Option(
        "model", help="model: the engine paces on the cost model; zero: no compute (pure overhead)"
    ),
) -> None:
    """Per-turn overhead of the SGLang HTTP client (to serve-sim) over the in-process engine."""
    from rollout.engines.base import EngineError
    from rollout.jobs.engine_bench import EngineBenchConfig, run_engine_bench

    counts = tuple(int(part) for part in sessions.split(",") if part.strip())
    config = EngineBenchConfig(
        serve_sim_config=Path(__file__).parents[2] / "configs/serve_sim/default.yaml",
        sessions=counts,
        turns=turns,
        prompt_tokens=prompt_tokens,
        cost="zero" if cost == "zero" else "model",
    )
    try:
        with console.status("benchmarking") as status:
            rows = asyncio.run(run_engine_bench(config, progress=lambda line: status.update(line)))
    except EngineError as exc:
        fail(str(exc))
    engine = "zero-cost" if cost == "zero" else "cost-model-paced (SIMULATED)"
    table = Table(
        title=f"per-turn latency, {engine} engine ({turns} turns/session, prompts from "
        f"{prompt_tokens} tokens): HTTP client -> serve-sim vs in process"
    )
    columns = ("sessions", "turns", "in process p50/p99", "HTTP p50/p99", "added p50/p99",
               "CPU/turn in process", "CPU/turn client + server", "HTTP by stats()")  # fmt: skip
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(
            str(row.sessions),
            str(row.turns),
            f"{row.in_process_ms[0]:.2f} / {row.in_process_ms[1]:.2f} ms",
            f"{row.http_ms[0]:.2f} / {row.http_ms[1]:.2f} ms",
            f"{row.added_ms[0]:.2f} / {row.added_ms[1]:.2f} ms",
            f"{row.in_process_cpu_ms:.2f} ms",
            f"{row.client_cpu_ms:.2f} + {row.server_cpu_ms:.2f} ms",
            str(row.stats_http_calls),
        )
    console.print(table)


@app.command("rollout")
def bench_rollout(
    config: Path = typer.Argument(
        Path(__file__).parents[2] / "configs/simulate/swe_like.yaml", help="simulate config"
    ),
    overrides: list[str] = typer.Argument(None, help="key=value overrides of the config"),
    seeds: str = typer.Option("0,1,2,3,4", help="seeds, comma-separated (each a whole run)"),
    sweep: list[str] = typer.Option(
        [],
        help="tune a baseline: POLICY:KEY=V1,V2,... (repeatable), e.g. "
        "traj_async:conductor.agent_slots=8,16,32,64; its best value is compared to ours",
    ),
    refine: int = typer.Option(
        0,
        min=0,
        help="after the sweeps, also run every value between each numeric sweep's best and "
        "its neighbours in steps of at most this (0 = no refinement), e.g. --refine 4",
    ),
    markdown: Path | None = typer.Option(
        None, help="also append the table, as Markdown, to this file (for docs/benchmarks.md)"
    ),
    figures: Path | None = typer.Option(
        None,
        help="also draw comparison PNGs of the first seed's runs into this new folder (busy "
        "fraction, KV occupancy and hits, env share, throughput vs T_next); the runs are "
        "kept in its runs/ (open one with `conductor report`)",
    ),
    figures_config: Path = typer.Option(
        DEFAULT_BENCH_FIGURES_CONFIG, help="figure config (YAML) for --figures"
    ),
    jobs: int = typer.Option(
        1,
        min=1,
        help="runs at once, each in a process of its own (one per core); the results are "
        "the same as with 1",
    ),
) -> None:
    """Policies over several seeds (SIMULATED): T_next mean and min–max, ratios that count."""
    from foundation.errors import ConfigError
    from rollout.jobs.bench_rollout import parse_sweep, refine_sweep, run_seeds

    seed_list = [int(part) for part in seeds.split(",") if part.strip()]
    record_dir = None if figures is None else figures / "runs"
    try:
        if record_dir is not None and record_dir.exists() and any(record_dir.iterdir()):
            raise ValueError(f"{record_dir} is not empty: give --figures a new folder")
        figure_settings = None if figures is None else _figure_config(figures_config)
        variants = [variant for text in sweep for variant in parse_sweep(text)]
        with console.status("simulating") as status:
            results = run_seeds(
                config,
                overrides or [],
                seed_list,
                variants=variants,
                progress=lambda line: status.update(line),
                record_dir=record_dir,
                jobs=jobs,
            )
            fine = (
                [v for text in sweep for v in refine_sweep(text, results, refine)] if refine else []
            )
            if fine:
                results += run_seeds(
                    config,
                    overrides or [],
                    seed_list,
                    variants=fine,
                    progress=lambda line: status.update(f"refining: {line}"),
                    record_dir=record_dir,
                    config_policies=False,
                    jobs=jobs,
                )
                variants += fine
    except (ConfigError, ValueError) as exc:
        fail(str(exc))
    _print_comparison(results, variants, config, overrides or [], seeds, markdown)
    if figures is not None and figure_settings is not None:
        _draw_figures(results, figures, figure_settings, config, overrides or [], seed_list[0])


def _print_comparison(
    results: list[SeedSpread],
    variants: list[Variant],
    config: Path,
    overrides: Sequence[str],
    seeds: str,
    markdown: Path | None,
) -> None:
    """The comparison table (and its Markdown, appended to `markdown`) and each swept
    baseline's best line."""
    from rollout.jobs.bench_rollout import (
        best_lines,
        comparison_rows,
        markdown_table,
        ratios_to_ours,
    )

    ratios = ratios_to_ours(results)
    title = (
        f"SIMULATED ({config.name} {' '.join(overrides)}, seeds {seeds}): T_next mean over "
        "steps, mean [min–max] over seeds; ratio = baseline ÷ ours per seed, counts when its "
        "spread does not cross 1; ÷ floor = T_next ÷ the engine-time floor of the consumed "
        "samples, = 1 + forwards + extra work + idle (each ÷ the floor: the fixed cost of "
        "forwards beyond the floor's, per-token work beyond the consumed samples' once-over, "
        "idle engines; rollout.simulation.floor_gap); length bias = consumed ÷ admitted mean "
        "trajectory length (p90: of the 90th percentiles); reward bias = consumed − admitted "
        "mean reward"
    )
    columns, rows = comparison_rows(results, ratios)
    table = Table(title=escape(title))
    for column in columns:
        table.add_column(column, overflow="fold")  # a narrow terminal wraps, never hides
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    best = best_lines(results, variants, ratios)
    if markdown is not None:
        with markdown.open("a", encoding="utf-8") as out:
            out.write(markdown_table(title, columns, rows, best))
        console.print(f"appended the table to {markdown}")
    for line in best:
        console.print(escape(line))


def _figure_config(path: Path) -> BenchFigureConfig:
    from foundation.config import load_config
    from rollout.observe.bench_plots import BenchFigureConfig

    return load_config(BenchFigureConfig, path, [])


def _draw_figures(
    results: Sequence[SeedSpread],
    out_dir: Path,
    settings: BenchFigureConfig,
    config: Path,
    overrides: Sequence[str],
    seed: int,
) -> None:
    """The comparison PNGs of `rollout.observe.bench_plots` from the recorded first seed."""
    from rollout.observe.bench_plots import (
        THROUGHPUTS,
        counter_examples,
        load_policy_trace,
        write_bench_figures,
    )

    traces = [
        load_policy_trace(result.policy, result.run_dir)
        for result in results
        if result.run_dir is not None
    ]
    cell = " ".join([config.name, *(o for o in overrides if not o.startswith("policies="))])
    subtitle = textwrap.fill(f"{cell}, seed {seed}", width=110)
    written = write_bench_figures(traces, out_dir, settings, subtitle)
    for caption, path in written.items():
        console.print(f"{escape(caption)}: {path}")
    for measure, pick in THROUGHPUTS:
        worse = counter_examples(traces, pick)
        if worse:
            console.print(
                escape(f"more {measure} than ours yet a longer T_next: {', '.join(worse)}")
            )


@app.command("swe")
def bench_swe(
    container_starts: int = typer.Option(10, help="containers started for the start-time figure"),
) -> None:
    """Task images from scratch vs cache, container start, grading time per shipped task."""
    from envs.swe.bench import run_swe_bench
    from envs.swe.images import TaskImageConfig, TaskImageResolver
    from envs.swe.tasks import load_shipped_tasks

    try:
        client = docker_client()
        base = ensure_base_image(client, progress=console.print)
        resolver = TaskImageResolver(TaskImageConfig(), base)
        with console.status("benchmarking the SWE env") as status:
            result = asyncio.run(
                run_swe_bench(
                    client,
                    load_shipped_tasks(),
                    resolver,
                    container_starts=container_starts,
                    progress=lambda line: status.update(line),
                )
            )
    except ConductorError as exc:
        fail(str(exc))
    table = Table(title="SWE env benchmark (shipped task set, Docker)")
    table.add_column("measure")
    table.add_column("value")
    for row in result.rows():
        table.add_row(*row)
    console.print(table)
    if result.failures:
        fail(f"gold patch not resolved for: {', '.join(result.failures)}")


@app.command("scheduler")
def bench_scheduler(
    config: Path = typer.Argument(
        Path(__file__).parents[2] / "configs/bench/scheduler.yaml",
        help="benchmark config (scales, workload, scheduler and priority settings)",
    ),
    overrides: list[str] = typer.Argument(
        None, help="key=value overrides of the config, e.g. measured_events=5000"
    ),
    json_out: Path | None = typer.Option(
        None, "--json", help="also write every figure (and the config) to this JSON file"
    ),
    markdown: Path | None = typer.Option(
        None, help="also append the table, as Markdown, to this file"
    ),
) -> None:
    """Decision latency of the pure scheduling core per event, at each scale (virtual time).

    A seeded synthetic rollout drives the real RolloutScheduler, PriorityKeeper and
    AdmissionController as the conductor does (admissions, generations and tool calls ending,
    turn-boundary priority refreshes, engine stats, preemptions, weight-update interruptions);
    every core call is timed and reported as p50 / p99 / max per event kind and overall.
    """
    from foundation.config import load_config
    from foundation.errors import ConfigError
    from rollout.jobs.scheduler_bench import (
        COLUMNS,
        SchedulerBenchConfig,
        latency_rows,
        run_scheduler_bench,
        to_json,
    )
    from rollout.jobs.scheduler_bench import markdown_table as scheduler_markdown

    try:
        bench_config = load_config(SchedulerBenchConfig, config, overrides or [])
    except ConfigError as exc:
        fail(str(exc))
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("core calls timed", total=None)
        results = run_scheduler_bench(
            bench_config, progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
    title = (
        f"scheduler decision latency per core call ({' '.join([config.name, *(overrides or [])])}; "
        f"{bench_config.measured_events:,} events per scale after {bench_config.warmup_events:,} "
        f"warm-up; target p99 ≤ {bench_config.target_p99_us:g} µs)"
    )
    table = Table(title=escape(title))
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for result in results:
        for row, kind in zip(latency_rows([result]), result.kinds, strict=True):
            style = "bold" if kind.kind == "all" else None
            table.add_row(*row, style=style)
    console.print(table)
    for result in results:
        overall = result.overall
        target = bench_config.target_p99_us
        verdict = "meets" if overall.p99_us <= target else "MISSES"
        cpu_verdict = "meets" if overall.cpu_p99_us <= target else "MISSES"
        console.print(
            escape(
                f"{result.scale.label}: p99 {overall.p99_us:.1f} µs wall ({verdict} the target), "
                f"{overall.cpu_p99_us:.1f} µs CPU ({cpu_verdict}) over {overall.calls:,} calls; "
                f"{result.decisions:,} decisions, "
                f"{result.virtual_s:.0f} s simulated in {result.wall_s:.1f} s"
            )
        )
    if json_out is not None:
        json_out.write_text(to_json(bench_config, results), encoding="utf-8")
        console.print(f"wrote {json_out}")
    if markdown is not None:
        with markdown.open("a", encoding="utf-8") as out:
            out.write(scheduler_markdown(title, results))
        console.print(f"appended the table to {markdown}")
