"""PNG figures of a run's metrics (matplotlib, Agg canvas; pyplot and its global state unused).

Each figure is one function from `RunMetrics` (plus the per-sample timelines) to a PNG file.
Figures whose inputs are absent (a run without engine samples) are not drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from pydantic import Field

from foundation.config import FrozenConfig
from harness.events import Phase
from rollout.observe.metrics import RunMetrics
from rollout.observe.phase_metrics import SAMPLE_PHASES, PhaseTotals, SampleTimeline
from rollout.observe.titles import BUSY_UNKNOWN

__all__ = [
    "PERCENT",
    "PHASE_COLORS",
    "PHASE_LABELS",
    "PlotConfig",
    "draw_phase_shares",
    "mark_batches",
    "new_figure",
    "save_png",
    "smoothing_window_s",
    "trailing_mean",
    "write_plots",
]


class PlotConfig(FrozenConfig):
    """How the report's figures are drawn (`configs/report/default.yaml`)."""

    timeline_samples: int = Field(
        default=40, ge=1, description="Samples shown in the per-sample timeline (samples)."
    )
    busy_window_s: float = Field(
        default=10.0,
        ge=0.0,
        description=(
            "Shortest trailing window of the smoothed engine-busy curve; 0 draws the raw "
            "samples only (seconds of run time)."
        ),
    )
    busy_window_fraction: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description=(
            "The smoothing window grows to this fraction of the sampled time span, so a long "
            "run's curve stays readable (fraction of the run)."
        ),
    )
    raw_busy_max_samples: int = Field(
        default=300,
        ge=0,
        description=(
            "Draw the faint raw busy trace under the smoothed curve only for engines with at "
            "most this many samples; denser traces fill the plot (samples)."
        ),
    )
    width_in: float = Field(default=10.0, gt=0.0, description="Figure width (inches).")
    height_in: float = Field(default=4.5, gt=0.0, description="Figure height (inches).")
    timeline_row_in: float = Field(
        default=0.22, gt=0.0, description="Height of one sample's row in the timeline (inches)."
    )
    dpi: int = Field(default=110, ge=30, description="Resolution of the PNG files (dots/inch).")
    max_step_labels: int = Field(
        default=30, ge=2, description="At most this many step labels on a step axis (labels)."
    )


PHASE_COLORS: Mapping[Phase, str] = MappingProxyType(
    {
        # Waiting in warm colours, useful work in cool colours.
        Phase.PRE_GEN: "#f4a261",
        Phase.GEN: "#2a9d8f",
        Phase.PRE_ACT: "#e9c46a",
        Phase.ACT: "#264653",
        Phase.ENV_INIT: "#8d99ae",
        Phase.PREEMPT: "#d62828",
        Phase.INTERRUPT: "#7b2cbf",
        Phase.INFRA_ERROR: "#000000",
    }
)
PHASE_LABELS: Mapping[Phase, str] = MappingProxyType(
    {
        Phase.PRE_GEN: "pre_gen (queue + KV reload)",
        Phase.GEN: "gen",
        Phase.PRE_ACT: "pre_act (wait for env)",
        Phase.ACT: "act (tool runs)",
        Phase.ENV_INIT: "env_init (container start)",
        Phase.PREEMPT: "preempted",
        Phase.INTERRUPT: "interrupted",
        Phase.INFRA_ERROR: "infra error",
    }
)
_MARKER_PHASES = (Phase.PREEMPT, Phase.INTERRUPT, Phase.INFRA_ERROR)
PERCENT = 100.0


def write_plots(
    metrics: RunMetrics,
    timelines: Sequence[SampleTimeline],
    plots_dir: Path,
    config: PlotConfig,
) -> dict[str, Path]:
    """Draw every figure the inputs allow into `plots_dir`; returns {caption: PNG path}."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, Path] = {}

    def save(caption: str, name: str, figure: Figure) -> None:
        drawn[caption] = save_png(figure, plots_dir / name)

    save("T_next per training step", "t_next.png", _t_next_figure(metrics, config))
    if metrics.engines:
        save("Engine busy fraction over time", "busy.png", _busy_figure(metrics, config))
        save("KV occupancy and hit rate over time", "kv.png", _kv_figure(metrics, config))
    if metrics.phases.sample_time_s > 0:
        save("Phase breakdown of sample time", "phases.png", _phase_figure(metrics, config))
    if metrics.staleness_histogram:
        save("Staleness of consumed groups", "staleness.png", _staleness_figure(metrics, config))
    if timelines:
        save("Per-sample timeline", "timeline.png", _timeline_figure(timelines, config))
    return drawn


def trailing_mean(t_s: Sequence[float], values: Sequence[float], window_s: float) -> list[float]:
    """Mean of `values` over the trailing window (t - window_s, t] at each time (times sorted)."""
    smoothed: list[float] = []
    total = 0.0
    first = 0
    for index, (time_s, value) in enumerate(zip(t_s, values, strict=True)):
        total += value
        while t_s[first] <= time_s - window_s and first < index:
            total -= values[first]
            first += 1
        smoothed.append(total / (index - first + 1))
    return smoothed


def smoothing_window_s(config: PlotConfig, t_s: Sequence[float]) -> float:
    """The trailing window of a smoothed busy curve over samples at `t_s` (sorted, non-empty)."""
    return max(config.busy_window_s, config.busy_window_fraction * (t_s[-1] - t_s[0]))


# -- shared drawing helpers (also used by rollout.observe.bench_plots) ------------------------


def new_figure(config: PlotConfig, rows: int = 1, height_in: float | None = None) -> Figure:
    """An empty figure `config.width_in` wide, `rows` × `config.height_in` high (or `height_in`)."""
    height = config.height_in * rows if height_in is None else height_in
    return Figure(figsize=(config.width_in, height), dpi=config.dpi, layout="constrained")


def save_png(figure: Figure, path: Path) -> Path:
    """Render `figure` to the PNG file `path` (Agg canvas, no pyplot); returns `path`."""
    FigureCanvasAgg(figure).print_png(path)
    return path


def mark_batches(
    axes: Axes,
    completed_s: Sequence[float],
    *,
    color: str = "#888888",
    label: str | None = "batch complete",
) -> None:
    """A dotted vertical line at each batch completion; `label` on the first one only."""
    for index, time_s in enumerate(completed_s):
        axes.axvline(
            time_s,
            color=color,
            linestyle=":",
            linewidth=0.8,
            label=label if index == 0 else None,
        )


def draw_phase_shares(axes: Axes, bars: Sequence[tuple[str, PhaseTotals]]) -> list[int]:
    """One stacked bar per (label, totals): each phase's share of sample time (%), in
    `SAMPLE_PHASES` order and `PHASE_COLORS`; returns the bar positions (0, 1, ...)."""
    positions = list(range(len(bars)))
    bottoms = [0.0] * len(bars)
    for phase in SAMPLE_PHASES:
        heights = [(totals.share(phase) or 0.0) * PERCENT for _, totals in bars]
        axes.bar(
            positions,
            heights,
            bottom=bottoms,
            color=PHASE_COLORS[phase],
            label=PHASE_LABELS[phase],
        )
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    return positions


# -- figures ----------------------------------------------------------------------------------


def _mark_steps(axes: Axes, metrics: RunMetrics) -> None:
    mark_batches(axes, [step.completed_s for step in metrics.steps])


def _step_ticks(axes: Axes, positions: Sequence[float], labels: Sequence[str], most: int) -> None:
    """Label at most about `most` ticks, always including the last (the 'all' bar)."""
    stride = max(1, math.ceil(len(labels) / most))
    shown = list(range(0, len(labels), stride))
    if shown and shown[-1] != len(labels) - 1:
        shown.append(len(labels) - 1)
    axes.set_xticks([positions[i] for i in shown], [labels[i] for i in shown])


def _t_next_figure(metrics: RunMetrics, config: PlotConfig) -> Figure:
    figure = new_figure(config)
    axes = figure.add_subplot()
    steps = [step.step for step in metrics.steps]
    axes.bar(steps, [s.t_next_s for s in metrics.steps], color=PHASE_COLORS[Phase.GEN])
    axes.axhline(
        metrics.mean_t_next_s,
        color="#d62828",
        linestyle="--",
        label=f"mean {metrics.mean_t_next_s:.2f} s",
    )
    _step_ticks(axes, steps, [str(s) for s in steps], config.max_step_labels)
    axes.set(
        title="T_next per training step (time until the batch's B groups were complete)",
        xlabel="training step",
        ylabel="T_next (s)",
    )
    axes.legend()
    return figure


def _busy_figure(metrics: RunMetrics, config: PlotConfig) -> Figure:
    figure = new_figure(config)
    axes = figure.add_subplot()
    for engine in metrics.engines:
        if engine.busy_fraction is None:
            continue  # it reported no busy time
        raw = [value * PERCENT for value in engine.busy]
        window_s = smoothing_window_s(config, engine.t_s)
        if config.busy_window_s <= 0:
            axes.plot(engine.t_s, raw, linewidth=1.2, label=engine.engine)
            continue
        (line,) = axes.plot(
            engine.t_s,
            trailing_mean(engine.t_s, raw, window_s),
            linewidth=1.6,
            label=f"{engine.engine} ({window_s:.3g} s trailing mean)",
        )
        if len(raw) <= config.raw_busy_max_samples:
            axes.plot(engine.t_s, raw, color=line.get_color(), linewidth=0.6, alpha=0.3)
    _mark_steps(axes, metrics)
    busy = metrics.busy_fraction
    summary = f"n/a: {BUSY_UNKNOWN}" if busy is None else f"{busy:.1%}"
    axes.set(
        title=f"Engine busy fraction over time (GPU utilisation; mean {summary})",
        xlabel="run time (s)",
        ylabel="busy (%)",
        ylim=(0, 105),
    )
    if busy is not None:
        axes.legend(loc="lower right", fontsize="small")
    return figure


def _kv_figure(metrics: RunMetrics, config: PlotConfig) -> Figure:
    figure = new_figure(config, rows=2)
    occupancy, hits = figure.subplots(2, 1, sharex=True)
    for engine in metrics.engines:
        occupancy.plot(engine.t_s, [v * PERCENT for v in engine.kv_occupancy], label=engine.engine)
        hits.plot(engine.t_s, [v * PERCENT for v in engine.hit_rate], label=engine.engine)
    _mark_steps(occupancy, metrics)
    _mark_steps(hits, metrics)
    occupancy.set(
        title="Device KV occupancy (used / capacity tokens)", ylabel="occupancy (%)", ylim=(0, 105)
    )
    kv = metrics.kv
    hit_text = "" if kv is None or kv.hit_rate is None else f"; final {kv.hit_rate:.1%}"
    hits.set(
        title=f"Cumulative prefix-cache hit rate (device + host hits / tokens looked up{hit_text})",
        xlabel="run time (s)",
        ylabel="hit rate (%)",
        ylim=(0, 105),
    )
    occupancy.legend(loc="lower right", fontsize="small")
    hits.legend(loc="lower right", fontsize="small")
    return figure


def _phase_figure(metrics: RunMetrics, config: PlotConfig) -> Figure:
    figure = new_figure(config)
    axes = figure.add_subplot()
    bars: list[tuple[str, PhaseTotals]] = [
        (str(step.step), phases)
        for step, phases in zip(metrics.steps, metrics.step_phases, strict=True)
        if phases.sample_time_s > 0
    ]
    bars.append(("all", metrics.phases))
    positions = draw_phase_shares(axes, bars)
    _step_ticks(axes, positions, [label for label, _ in bars], config.max_step_labels)
    e_rollout = metrics.e_rollout
    e_text = "n/a" if e_rollout is None else f"{e_rollout:.1%}"
    axes.set(
        title=f"Where sample time goes, per training step's samples (E_rollout {e_text})",
        xlabel="training step (samples of its groups); 'all' = every sample",
        ylabel="share of sample time (%)",
        ylim=(0, 100),
    )
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return figure


def _staleness_figure(metrics: RunMetrics, config: PlotConfig) -> Figure:
    figure = new_figure(config)
    axes = figure.add_subplot()
    values = [value for value, _ in metrics.staleness_histogram]
    axes.bar(values, [count for _, count in metrics.staleness_histogram], color="#457b9d")
    axes.set_xticks(range(min(values), max(values) + 1))
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set(
        title="Staleness of the groups the trainer consumed",
        xlabel="staleness (steps behind the current policy)",
        ylabel="groups",
    )
    return figure


def _timeline_figure(timelines: Sequence[SampleTimeline], config: PlotConfig) -> Figure:
    rows = len(timelines)
    height = max(config.height_in, rows * config.timeline_row_in + 1.5)
    figure = new_figure(config, height_in=height)
    axes = figure.add_subplot()
    labelled: set[Phase] = set()

    def label(phase: Phase) -> str | None:
        if phase in labelled:
            return None
        labelled.add(phase)
        return PHASE_LABELS[phase]

    bar_rows = {phase: (-0.35, 0.7) for phase in SAMPLE_PHASES}
    # env_init overlaps the first generation, so it is drawn as a thin bar under the row.
    bar_rows[Phase.ENV_INIT] = (0.36, 0.12)
    for row, timeline in enumerate(timelines):
        for phase, (offset, height) in bar_rows.items():
            bars = [(s.start_s, s.end_s - s.start_s) for s in timeline.spans if s.phase is phase]
            if bars:  # one call per row and phase: a call per span is slow for long runs
                axes.broken_barh(
                    bars,
                    (row + offset, height),
                    facecolors=PHASE_COLORS[phase],
                    label=label(phase),
                )
        for phase in _MARKER_PHASES:
            starts = [s.start_s for s in timeline.spans if s.phase is phase]
            if starts:
                axes.plot(
                    starts,
                    [row] * len(starts),
                    marker="x",
                    markersize=6,
                    color=PHASE_COLORS[phase],
                    linestyle="none",
                    label=label(phase),
                )
    axes.set_yticks(range(rows), [timeline.sample_id for timeline in timelines], fontsize="x-small")
    axes.invert_yaxis()
    axes.set(
        title=f"Per-sample timeline (first {rows} samples by start)",
        xlabel="run time (s)",
        ylabel="sample",
    )
    handles, labels = axes.get_legend_handles_labels()
    order = list(PHASE_LABELS.values())
    ranked = sorted(zip(labels, handles, strict=True), key=lambda pair: order.index(pair[0]))
    axes.legend(
        [handle for _, handle in ranked],
        [text for text, _ in ranked],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize="small",
    )
    return figure
