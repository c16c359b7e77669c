"""The run report: metrics.json, report.md and PNG plots for a run directory, and run comparisons.

`write_report` reads a run directory (`run_dir`), aggregates it (`metrics`) and writes the
summary; `compare_table` puts several runs side by side with ratios to a reference
(used to compare scheduling policies on the same workload).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.events import StepEvent
from rollout.observe.integrity import RunIntegrity, assess_integrity
from rollout.observe.metrics import RunMetrics, compute_run_metrics, format_value
from rollout.observe.phase_metrics import SAMPLE_PHASES, sample_timelines
from rollout.observe.plots import PlotConfig, write_plots
from rollout.observe.run_dir import (
    EVENTS_FILE,
    HEALTH_FILE,
    TIMESERIES_FILE,
    TRAJECTORIES_FILE,
    RunDir,
)
from rollout.observe.run_records import MissingRunFileError
from rollout.observe.titles import BUSY_UNKNOWN, run_engine_title

__all__ = [
    "METRIC_EXPLANATIONS",
    "GeneratedReport",
    "compare_table",
    "generate_report",
    "load_run_metrics",
    "render_markdown",
    "write_report",
]

METRIC_EXPLANATIONS: Mapping[str, str] = MappingProxyType(
    {
        "T_next": (
            "seconds from the previous batch's completion (the run start for step 1) until this "
            "step's B groups were all finished and rewarded. The objective: lower is better; it is "
            "what the trainer waits for, unlike tokens per second."
        ),
        "E_rollout": (
            "Σ(T_gen + T_act) / Σ(T_pre_gen + T_gen + T_pre_act + T_act) over all samples: the "
            "share of sample time spent generating or running tools rather than waiting. "
            "T_pre_gen includes the time a request queued inside the engine before its first "
            "forward (as the engine reports it), so every policy's queueing counts alike. "
            "T_env_init is left out because it overlaps the first generation."
        ),
        "engine busy fraction": (
            "mean of the engine's sampled busy flag (or per-interval busy fraction), averaged over "
            "engines: how much of the time the GPU had work (the turn-level agentic bubble "
            "shows up as idle time while samples wait for their tools)."
        ),
        "KV occupancy": "device KV tokens in use over device KV capacity, per engine sample.",
        "KV hit rates": (
            "where the prefix tokens looked up at admission were found, from the last cumulative "
            "counters: on the device, on the host (reloaded over PCIe) or nowhere (a miss, "
            "computed again). Recomputed tokens count prefill work spent on KV that was evicted."
        ),
        "pre_gen / pre_act": (
            "waiting for a generation slot plus KV reload or recompute (pre_gen), and waiting for "
            "an act slot or a container that is not ready (pre_act): totals, means per turn and "
            "shares of sample time."
        ),
        "env (act) share": "the share of sample time spent with the tool running in its env.",
        "preemptions / interruptions": (
            "generations aborted for a critical sample (preempt) or by a weight update (interrupt)."
        ),
        "staleness": "how many policy versions behind each consumed group was (0 = on-policy).",
        "infra errors": "samples ended by an infrastructure failure; retried, never trained on.",
    }
)
"""One line per metric, printed at the end of report.md."""

_OPTIONAL_INPUTS = (
    ("events", EVENTS_FILE, "phase times come from the trajectories, no per-sample timeline"),
    ("timeseries", TIMESERIES_FILE, "no engine busy fraction, KV occupancy or hit rates"),
    ("trajectories", TRAJECTORIES_FILE, "mean reward from events or steps"),
)


def load_run_metrics(run_dir: Path | RunDir) -> RunMetrics:
    """Read a run directory and aggregate it; only steps.jsonl is required."""
    return _load(_as_run_dir(run_dir))[0]


@dataclass(frozen=True, slots=True)
class GeneratedReport:
    """What `generate_report` wrote, and the metrics it computed."""

    report_path: Path
    metrics_path: Path
    plots: Mapping[str, Path]
    metrics: RunMetrics
    integrity: RunIntegrity


def write_report(run_dir: Path | RunDir, config: PlotConfig | None = None) -> Path:
    """Write metrics.json, plots/*.png and report.md into `run_dir`; returns report.md's path.

    Raises `MissingRunFileError` when the run recorded no training step (nothing to report).
    """
    return generate_report(run_dir, config).report_path


def generate_report(run_dir: Path | RunDir, config: PlotConfig | None = None) -> GeneratedReport:
    """`write_report`, returning the metrics and every path written as well."""
    directory = _as_run_dir(run_dir)
    plot_config = config or PlotConfig()
    metrics, events, consumed_groups, trajectory_groups = _load(directory)
    integrity = assess_integrity(
        (
            directory.steps_path,
            directory.events_path,
            directory.timeseries_path,
            directory.trajectories_path,
        ),
        consumed_groups,
        trajectory_groups,
    )
    health = _read_health(directory)
    record = {**metrics.to_dict(), "integrity": integrity.to_dict()}
    if health is not None:
        record["health"] = health
    metrics_path = directory.write_metrics(record)
    timelines = sample_timelines(events, metrics.run_start_s, plot_config.timeline_samples)
    plots = write_plots(metrics, timelines, directory.plots_dir, plot_config)
    relative = {caption: path.relative_to(directory.root) for caption, path in plots.items()}
    engine = _engine_title(directory)
    title = directory.root.name if engine is None else f"{directory.root.name} ({engine})"
    directory.report_path.write_text(
        render_markdown(metrics, title=title, plots=relative, warnings=integrity.warnings)
        + render_health(health),
        encoding="utf-8",
    )
    return GeneratedReport(
        report_path=directory.report_path,
        metrics_path=metrics_path,
        plots=MappingProxyType(dict(plots)),
        metrics=metrics,
        integrity=integrity,
    )


def render_markdown(
    metrics: RunMetrics,
    *,
    title: str,
    plots: Mapping[str, Path] | None = None,
    warnings: Sequence[str] = (),
) -> str:
    """The report.md text; `plots` maps captions to PNG paths relative to the report;
    `warnings` (data the run directory lost) come first, where no reader misses them."""
    lines = [f"# Run report: {title}", "", *_inputs_note(metrics), ""]
    if warnings:
        lines += ["## Warnings: incomplete data", "", *(f"- {w}" for w in warnings), ""]
    lines += ["## Summary", "", "| metric | value |", "|---|---:|"]
    lines += [f"| {row.name} | {row.text} |" for row in metrics.summary_rows()]
    if metrics.engines and metrics.busy_fraction is None:
        lines += ["", f"Engine busy fraction n/a: {BUSY_UNKNOWN}."]
    if metrics.infra_error_causes:
        causes = ", ".join(f"`{cause}` {count}" for cause, count in metrics.infra_error_causes)
        lines += ["", f"Infra errors by cause: {causes}."]
    lines += ["", "## Training steps", ""]
    lines += [
        "| step | batch complete at | T_next | groups | policy version | max staleness "
        "| mean reward |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {s.step} | {format_value(s.completed_s, 's')} | {format_value(s.t_next_s, 's')} "
        f"| {s.groups} | {s.policy_version} | {s.max_staleness} "
        f"| {format_value(s.rewards_mean, '')} |"
        for s in metrics.steps
    ]
    lines += ["", "## Phase breakdown", "", *_phase_table(metrics), ""]
    if metrics.staleness_histogram:
        lines += ["## Staleness", "", "| staleness (steps) | groups |", "|---:|---:|"]
        lines += [f"| {value} | {count} |" for value, count in metrics.staleness_histogram]
        lines.append("")
    if plots:
        lines += ["## Plots", ""]
        for caption, path in plots.items():
            lines += [f"### {caption}", "", f"![{caption}]({path.as_posix()})", ""]
    lines += ["## What the metrics mean", ""]
    lines += [f"- **{name}**: {text}" for name, text in METRIC_EXPLANATIONS.items()]
    return "\n".join(lines) + "\n"


def compare_table(runs: Mapping[str, RunMetrics], reference: str | None = None) -> str:
    """A Markdown table of the runs' summaries side by side, with ratios to `reference`.

    `reference` defaults to the first run. A cell reads "value (×ratio)" where both values are
    numbers and the reference is not zero.
    """
    if not runs:
        raise ValueError("compare_table needs at least one run")
    names = list(runs)
    ref_name = names[0] if reference is None else reference
    if ref_name not in runs:
        raise KeyError(f"reference run {ref_name!r} is not among the runs {names}")
    rows = {
        name: {row.key: row for row in metrics.summary_rows()} for name, metrics in runs.items()
    }
    keys = list(rows[ref_name])
    keys += [key for name in names for key in rows[name] if key not in keys]
    header = ["metric", *(f"{name} (reference)" if name == ref_name else name for name in names)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * len(names)]
    for key in keys:
        label = next(rows[name][key].name for name in names if key in rows[name])
        reference_row = rows[ref_name].get(key)
        cells = []
        for name in names:
            row = rows[name].get(key)
            if row is None:
                cells.append("—")
                continue
            text = row.text
            if (
                name != ref_name
                and reference_row is not None
                and reference_row.value
                and row.value is not None
            ):
                text += f" (×{row.value / reference_row.value:.2f})"
            cells.append(text)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _as_run_dir(run_dir: Path | RunDir) -> RunDir:
    directory = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    if not directory.root.is_dir():
        raise MissingRunFileError(
            f"{directory.root} is not a directory; pass the run directory the conductor wrote "
            "(it holds steps.jsonl)"
        )
    return directory


def _load(
    directory: RunDir,
) -> tuple[RunMetrics, list[StepEvent], list[str], set[str] | None]:
    """The run's metrics, its events (kept for the per-sample timeline), the groups its steps
    consumed, and the groups that have trajectories (None without trajectories.jsonl)."""
    events = directory.read_events()
    trajectories = directory.read_trajectories()
    steps = directory.read_steps()
    metrics = compute_run_metrics(
        steps=steps,
        events=events,
        timeseries=directory.read_timeseries(),
        trajectories=trajectories,
    )
    consumed = [group for step in steps for group in step.groups]
    present = directory.trajectories_path.exists()
    return metrics, events, consumed, {t.group_id for t in trajectories} if present else None


def _inputs_note(metrics: RunMetrics) -> list[str]:
    present = ", ".join(f"`{name}`" for name in metrics.inputs)
    lines = [f"Computed from {present}. Times are seconds since the run start."]
    for name, file_name, consequence in _OPTIONAL_INPUTS:
        if name not in metrics.inputs:
            lines.append(f"- `{file_name}` missing or empty: {consequence}.")
    return lines


def _phase_table(metrics: RunMetrics) -> list[str]:
    phases = metrics.phases
    lines = [
        "| phase | total | mean per turn | share of sample time |",
        "|---|---:|---:|---:|",
    ]
    for phase in SAMPLE_PHASES:
        lines.append(
            f"| {phase} | {format_value(phases.seconds(phase), 's')} "
            f"| {format_value(phases.mean_per_turn_s(phase), 's')} "
            f"| {format_value(phases.share(phase), 'fraction')} |"
        )
    env_init = format_value(phases.env_init_s, "s")
    lines.append(f"| env_init | {env_init} | — | — (overlaps the first gen) |")
    return lines


def _engine_title(directory: RunDir) -> str | None:
    """The run's engine as its config names it (None: no readable `conductor run` config)."""
    import yaml  # deferred: only the report reads the config back

    try:
        config = yaml.safe_load(directory.config_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return run_engine_title(config) if isinstance(config, dict) else None


def _read_health(directory: RunDir) -> dict[str, Any] | None:
    """The run's scheduler-health figures, if it wrote them (older runs did not)."""
    try:
        record = json.loads((directory.root / HEALTH_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def render_health(health: Mapping[str, Any] | None) -> str:
    """The report's "Scheduler health" section ('' without figures)."""
    if not health:
        return ""
    lines = [
        "",
        "## Scheduler health",
        "",
        "| figure | value |",
        "|---|---|",
        f"| deadline misses | {health.get('deadline_misses', 0)} of "
        f"{health.get('steps', 0)} steps |",
        f"| starved requests | {health.get('starved_requests', 0)} |",
        f"| promotions | {health.get('promotions', 0)} |",
        f"| prefix hit rate | {_fraction(health.get('prefix_hit_rate'))} |",
        f"| trainer blocked, mean per step | {_seconds(health.get('trainer_blocked_mean_s'))} |",
        f"| samples arriving / consumed per s | {_rate(health.get('arrival_rate_per_s'))} / "
        f"{_rate(health.get('consumption_rate_per_s'))} |",
    ]
    for cls, wait in (health.get("wait_by_class") or {}).items():
        lines.append(
            f"| wait for a slot, {cls} (mean / p99, {wait.get('count', 0)} waits) | "
            f"{_seconds(wait.get('mean_wait_s'))} / {_seconds(wait.get('p99_wait_s'))} |"
        )
    if "engine_step_fill" in health:
        lines.extend(_step_fill_rows(health["engine_step_fill"]))
    return "\n".join(lines) + "\n"


def _step_fill_rows(fill: Any) -> list[str]:
    """Tokens per engine step against its budget (n/a: the engines do not report steps)."""
    if not isinstance(fill, Mapping):
        return ["| engine step fill (tokens / budget) | n/a |"]
    rows = [
        f"| engine step fill, mean / p99 ({fill.get('steps', 0)} steps) | "
        f"{_fraction(fill.get('mean_fill'))} / {_fraction(fill.get('p99_fill'))} |"
    ]
    for kind in ("prefill", "decode"):
        part = fill.get(kind)
        if isinstance(part, Mapping):
            rows.append(
                f"| … {kind} steps vs {part.get('budget_tokens')} tokens, mean / p99 "
                f"({part.get('steps', 0)} steps) | {_fraction(part.get('mean_fill'))} / "
                f"{_fraction(part.get('p99_fill'))} |"
            )
    return rows


def _fraction(value: Any) -> str:
    return "—" if value is None else f"{float(value):.3f}"


def _seconds(value: Any) -> str:
    return "—" if value is None else f"{float(value):.2f} s"


def _rate(value: Any) -> str:
    return "—" if value is None else f"{float(value):.2f}"
