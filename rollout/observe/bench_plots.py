"""Comparison figures of `conductor bench rollout --figures DIR`: one seed's policies overlaid.

SIMULATED: every input is a simulated run (virtual time on the cost model). Each policy's run of
the bench's first seed is recorded to a run directory (steps, events, engine samples);
`load_policy_trace` reads one into a `PolicyTrace` (engines pooled per sample time) and
`write_bench_figures` draws (matplotlib, Agg canvas, the helpers of `rollout.observe.plots`):

- `busy.png`: engine busy fraction over run time, one panel per policy, its batch completions
  (step boundaries) marked: the GPU-utilisation curve within each step;
- `kv.png`: device KV occupancy, host KV occupancy (trailing means, as the busy curves) and the
  cumulative prefix hit rate over run time, policies overlaid, each policy's batch completions
  marked in its colour along the top;
- `env_share.png`: where sample time goes per policy (pre_gen, gen, pre_act, act), with the env
  (act: tool running) share in the axis labels;
- `throughput.png`: engine throughput against mean T_next per policy, twice: generated tokens
  per second, and tokens computed per second (generated plus prefilled, recomputation
  included). A policy right of ours and above it (`counter_examples`) gets more through the
  engine yet makes the trainer wait longer: throughput is not a shorter T_next.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib import colormaps
from matplotlib.figure import Figure
from pydantic import Field

from foundation.config import FrozenConfig
from harness.events import Phase, StepEvent
from rollout.observe.metrics import compute_run_metrics
from rollout.observe.phase_metrics import PhaseTotals
from rollout.observe.plots import (
    PERCENT,
    PlotConfig,
    draw_phase_shares,
    mark_batches,
    new_figure,
    save_png,
    smoothing_window_s,
    trailing_mean,
)
from rollout.observe.run_dir import RunDir
from rollout.observe.run_records import StepRecord, TimeseriesSample
from rollout.observe.stats import mean_or_none

__all__ = [
    "THROUGHPUTS",
    "BenchFigureConfig",
    "PolicyTrace",
    "counter_examples",
    "load_policy_trace",
    "policy_trace",
    "write_bench_figures",
]


class BenchFigureConfig(FrozenConfig):
    """How the bench's comparison figures are drawn (`configs/report/bench.yaml`)."""

    plot: PlotConfig = Field(
        default_factory=PlotConfig,
        description="Sizes, resolution and busy-curve smoothing, as for a run's report.",
    )
    panel_height_in: float = Field(
        default=1.6, gt=0.0, description="Height of one policy's busy panel (inches)."
    )
    ours_linewidth: float = Field(
        default=2.2, gt=0.0, description="Line width of ours (the first policy) (points)."
    )
    linewidth: float = Field(
        default=1.2, gt=0.0, description="Line width of every other policy (points)."
    )


@dataclass(frozen=True, slots=True)
class PolicyTrace:
    """One policy's recorded run, engines pooled at each sample time (seconds since the run
    start; fractions; NaN where undefined: no KV capacity, no host tier, no lookup yet)."""

    policy: str
    completed_s: tuple[float, ...]  # batch completions (step boundaries)
    mean_t_next_s: float
    phases: PhaseTotals
    t_s: tuple[float, ...]
    busy: tuple[float, ...]  # mean over engines
    device_occupancy: tuple[float, ...]  # Σ used ÷ Σ capacity over engines
    host_occupancy: tuple[float, ...]
    hit_rate: tuple[float, ...]  # cumulative (device + host hits) ÷ prefix tokens looked up
    generated_tokens_per_s: float | None  # all engines, run start to the last sample
    computed_tokens_per_s: float | None  # generated + prefilled (misses, recompute included)

    @property
    def env_share(self) -> float | None:
        """Share of sample time with the tool running in its env (act)."""
        return self.phases.share(Phase.ACT)


def _known_mean(values: Sequence[float | None]) -> float:
    """The mean of the values an engine reported (NaN if none did)."""
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else math.nan


def policy_trace(
    policy: str,
    steps: Sequence[StepRecord],
    events: Sequence[StepEvent],
    timeseries: Sequence[TimeseriesSample],
) -> PolicyTrace:
    """Pool one run's records into a `PolicyTrace` (pure)."""
    metrics = compute_run_metrics(steps, events, timeseries)
    start = metrics.run_start_s
    by_time: dict[float, list[TimeseriesSample]] = {}
    for sample in timeseries:
        by_time.setdefault(sample.t_s, []).append(sample)
    times = sorted(by_time)
    pooled = [by_time[t] for t in times]
    generated = computed = None
    if times and times[-1] > start:
        last, span_s = pooled[-1], times[-1] - start
        decoded = sum(s.extra.get("generated_tokens", 0.0) for s in last)
        generated = decoded / span_s
        computed = (decoded + sum(s.kv_misses for s in last)) / span_s
    return PolicyTrace(
        policy=policy,
        completed_s=tuple(step.completed_s for step in metrics.steps),
        mean_t_next_s=metrics.mean_t_next_s,
        phases=metrics.phases,
        t_s=tuple(t - start for t in times),
        busy=tuple(_known_mean([s.busy for s in group]) for group in pooled),
        device_occupancy=tuple(
            _fraction(sum(s.kv_used_tokens for s in g), sum(s.kv_capacity_tokens for s in g))
            for g in pooled
        ),
        host_occupancy=tuple(
            _fraction(
                sum(s.extra.get("kv_host_used_tokens", 0.0) for s in g),
                sum(s.extra.get("kv_host_capacity_tokens", 0.0) for s in g),
            )
            for g in pooled
        ),
        hit_rate=tuple(
            _fraction(
                sum(s.kv_device_hits + s.kv_host_hits for s in g),
                sum(s.kv_device_hits + s.kv_host_hits + s.kv_misses for s in g),
            )
            for g in pooled
        ),
        generated_tokens_per_s=generated,
        computed_tokens_per_s=computed,
    )


def load_policy_trace(policy: str, run_dir: Path) -> PolicyTrace:
    """`policy_trace` of the run directory `run_dir` (steps.jsonl required)."""
    directory = RunDir(run_dir)
    return policy_trace(
        policy, directory.read_steps(), directory.read_events(), directory.read_timeseries()
    )


def counter_examples(
    traces: Sequence[PolicyTrace], throughput: Callable[[PolicyTrace], float | None]
) -> list[str]:
    """The policies with a higher `throughput` (e.g. generated tokens/s) than ours (the first
    trace) and a longer mean T_next: more work per second, yet the trainer waits longer."""
    ours, *others = traces
    mine = throughput(ours)
    if mine is None:
        return []
    return [
        trace.policy
        for trace in others
        if (theirs := throughput(trace)) is not None
        and theirs > mine
        and trace.mean_t_next_s > ours.mean_t_next_s
    ]


THROUGHPUTS: tuple[tuple[str, Callable[[PolicyTrace], float | None]], ...] = (
    ("generated tokens/s", lambda trace: trace.generated_tokens_per_s),
    ("tokens computed/s (generated + prefilled)", lambda trace: trace.computed_tokens_per_s),
)
"""The throughput figure's two measures (label, value of a trace)."""


def write_bench_figures(
    traces: Sequence[PolicyTrace], out_dir: Path, config: BenchFigureConfig, subtitle: str
) -> dict[str, Path]:
    """Draw the four comparison figures (module doc) into `out_dir`; ours is `traces[0]`.
    `subtitle` names the cell and seed (it goes under every SIMULATED title). Returns
    {caption: PNG path}."""
    if not traces:
        raise ValueError("the bench figures need at least one policy's run")
    out_dir.mkdir(parents=True, exist_ok=True)
    colors = _colors(len(traces))
    figures = {
        "Engine busy fraction over time, per policy": ("busy.png", _busy_figure),
        "KV occupancy (device, host) and prefix hit rate over time": ("kv.png", _kv_figure),
        "Share of sample time per phase (env = act), per policy": (
            "env_share.png",
            _env_share_figure,
        ),
        "Throughput (generated, computed tokens/s) vs mean T_next, per policy": (
            "throughput.png",
            _throughput_figure,
        ),
    }
    return {
        caption: save_png(draw(traces, colors, config, subtitle), out_dir / name)
        for caption, (name, draw) in figures.items()
    }


# -- figures ----------------------------------------------------------------------------------


def _busy_figure(
    traces: Sequence[PolicyTrace], colors: Sequence[str], config: BenchFigureConfig, subtitle: str
) -> Figure:
    plot = config.plot
    figure = new_figure(plot, height_in=config.panel_height_in * len(traces) + 1.0)
    panels = figure.subplots(len(traces), 1, sharex=True, squeeze=False)[:, 0]
    for axes, trace, color in zip(panels, traces, colors, strict=True):
        raw = [value * PERCENT for value in trace.busy]
        if raw:
            window_s = smoothing_window_s(plot, trace.t_s)
            smooth = trailing_mean(trace.t_s, raw, window_s) if plot.busy_window_s > 0 else raw
            axes.plot(trace.t_s, smooth, color=color, linewidth=config.ours_linewidth)
            if plot.busy_window_s > 0 and len(raw) <= plot.raw_busy_max_samples:
                axes.plot(trace.t_s, raw, color=color, linewidth=0.6, alpha=0.3)
        mark_batches(axes, trace.completed_s, label=None)
        busy = mean_or_none(trace.busy)
        axes.set_title(
            f"{trace.policy}: mean busy {_percent(busy)}, mean T_next {trace.mean_t_next_s:,.1f} s",
            fontsize="small",
            loc="left",
        )
        axes.set(ylim=(0, 105), ylabel="busy (%)")
    panels[-1].set_xlabel("run time (s); dotted lines: batch complete (step boundary)")
    window = "" if plot.busy_window_s <= 0 else " (trailing mean, faint: raw samples)"
    figure.suptitle(
        f"SIMULATED: engine busy fraction over time, GPU utilisation{window}\n{subtitle}",
        fontsize="medium",
    )
    return figure


def _kv_figure(
    traces: Sequence[PolicyTrace], colors: Sequence[str], config: BenchFigureConfig, subtitle: str
) -> Figure:
    plot = config.plot
    figure = new_figure(plot, rows=2)
    device, host, hits = figure.subplots(3, 1, sharex=True)
    panels = (
        (device, "device KV occupancy (%)", lambda t: t.device_occupancy, True),
        (host, "host KV occupancy (%)", lambda t: t.host_occupancy, True),
        (hits, "prefix hit rate (%)", lambda t: t.hit_rate, False),  # cumulative: smooth
    )
    for index, (trace, color) in enumerate(zip(traces, colors, strict=True)):
        width = config.ours_linewidth if index == 0 else config.linewidth
        for axes, _, pick, smoothed in panels:
            values = [v * PERCENT for v in pick(trace)]
            if smoothed and values and plot.busy_window_s > 0:
                values = _trailing_mean_nan(trace.t_s, values, smoothing_window_s(plot, trace.t_s))
            axes.plot(
                trace.t_s,
                values,
                color=color,
                linewidth=width,
                label=trace.policy,
                zorder=3 if index == 0 else 2,  # ours on top where policies coincide
            )
            axes.plot(  # batch completions, along the top in the policy's colour
                trace.completed_s,
                [103.0] * len(trace.completed_s),
                marker="v",
                markersize=5,
                color=color,
                linestyle="none",
            )
    for axes, label, pick, _ in panels:
        axes.set(ylim=(0, 106), ylabel=label)
        if all(math.isnan(v) for trace in traces for v in pick(trace)):
            axes.text(0.5, 0.5, "no data (no host KV tier)", ha="center", transform=axes.transAxes)
    window = "" if plot.busy_window_s <= 0 else " (trailing mean)"
    device.set_title(f"device KV in use ÷ device KV pool{window}", fontsize="small", loc="left")
    host.set_title(
        f"host KV in use ÷ host KV pool: offloaded contexts{window}", fontsize="small", loc="left"
    )
    hits.set_title(
        "cumulative prefix hit rate: device + host hits ÷ prefix tokens looked up",
        fontsize="small",
        loc="left",
    )
    hits.set_xlabel("run time (s); ▼ along the top: each policy's batch completions, in its colour")
    device.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    figure.suptitle(
        f"SIMULATED: KV occupancy and prefix hits over time\n{subtitle}", fontsize="medium"
    )
    return figure


def _env_share_figure(
    traces: Sequence[PolicyTrace], colors: Sequence[str], config: BenchFigureConfig, subtitle: str
) -> Figure:
    del colors  # the bars are coloured by phase
    figure = new_figure(config.plot)
    axes = figure.add_subplot()
    positions = draw_phase_shares(axes, [(trace.policy, trace.phases) for trace in traces])
    labels = [f"{trace.policy} (env {_percent(trace.env_share)})" for trace in traces]
    axes.set_xticks(positions, labels, fontsize="small", rotation=35, ha="right")
    axes.set(
        ylabel="share of sample time (%)",
        ylim=(0, 100),
        title="SIMULATED: where sample time goes, per policy (env = act: tool running)\n"
        + subtitle,
    )
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return figure


def _throughput_figure(
    traces: Sequence[PolicyTrace], colors: Sequence[str], config: BenchFigureConfig, subtitle: str
) -> Figure:
    figure = new_figure(config.plot, rows=2)
    for axes, (measure, pick) in zip(figure.subplots(2, 1), THROUGHPUTS, strict=True):
        for index, (trace, color) in enumerate(zip(traces, colors, strict=True)):
            value = pick(trace)
            if value is None:
                continue
            ours = index == 0
            axes.scatter(
                [value],
                [trace.mean_t_next_s],
                color=color,
                marker="*" if ours else "o",
                s=220 if ours else 70,
                zorder=3,
                label=f"{trace.policy} (ours)" if ours else trace.policy,
            )
        for (x, y), names in _coinciding(traces, pick).items():
            axes.annotate(
                " = ".join(names),
                (x, y),
                textcoords="offset points",
                xytext=(6, 4),
                fontsize="x-small",
            )
        mine = pick(traces[0])
        if mine is not None:
            axes.axvline(mine, color="#888888", linestyle=":")
            axes.axhline(traces[0].mean_t_next_s, color="#888888", linestyle=":")
        worse = counter_examples(traces, pick)
        verdict = (
            f"more {measure} than ours yet a longer T_next: {', '.join(worse)}"
            if worse
            else f"no policy here has more {measure} than ours and a longer T_next"
        )
        axes.set(
            xlabel=f"{measure} (all engines, whole run)",
            ylabel="mean T_next (s; lower is better)",
        )
        axes.set_title(textwrap.fill(verdict, width=130), fontsize="small", loc="left")
    figure.axes[0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    figure.suptitle(
        "SIMULATED: engine throughput vs T_next (up and to the right of ★: "
        f"busier engine, longer wait)\n{subtitle}",
        fontsize="medium",
    )
    return figure


# -- helpers ----------------------------------------------------------------------------------


def _coinciding(
    traces: Sequence[PolicyTrace], pick: Callable[[PolicyTrace], float | None]
) -> dict[tuple[float, float], list[str]]:
    """The policies of each point of the throughput figure, points within 0.1 % merged (so
    coinciding labels are written once, joined)."""
    points: dict[tuple[float, float], list[str]] = {}
    for trace in traces:
        x, y = pick(trace), trace.mean_t_next_s
        if x is None:
            continue
        near = next(
            (
                p
                for p in points
                if math.isclose(p[0], x, rel_tol=1e-3) and math.isclose(p[1], y, rel_tol=1e-3)
            ),
            (x, y),
        )
        points.setdefault(near, []).append(trace.policy)
    return points


def _trailing_mean_nan(
    t_s: Sequence[float], values: Sequence[float], window_s: float
) -> list[float]:
    """`trailing_mean` of `values`; a series holding any NaN (undefined: no capacity) is
    returned as it is, unsmoothed, so its gaps stay gaps."""
    if any(math.isnan(v) for v in values):
        return list(values)
    return trailing_mean(t_s, values, window_s)


def _colors(count: int) -> list[str]:
    """A distinct colour per policy (tab10, tab20 beyond ten); ours first."""
    palette = colormaps["tab10" if count <= 10 else "tab20"]
    size = 10 if count <= 10 else 20
    return [_hex(palette(index % size)) for index in range(count)]


def _hex(rgba: Sequence[float]) -> str:
    return "#" + "".join(f"{round(channel * 255):02x}" for channel in rgba[:3])


def _fraction(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else math.nan


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"
