"""`conductor bench rollout`: the simulated comparison over several seeds, with its spread.

A ratio on one seed says little: the same workload drawn with another seed can reverse it. This
runs every policy of a `SimulateConfig` on each seed (the workload, the run and every policy use
that seed), in virtual time, and reports per policy the mean and the min–max of T_next (mean
over a run's steps) and its other headline numbers; and per baseline the ratio of its T_next to
ours, seed by seed, with the ratio's min–max. A ratio *counts* only when its whole spread lies on
one side of 1 (`Ratio.decisive`). SIMULATED: every figure is virtual time on the cost model.

A baseline is compared at its best setting: a *sweep* (`parse_sweep`, e.g.
`traj_async:conductor.agent_slots=8,16,32`) runs a policy once per value of one of its knobs,
and `best_of_sweeps` keeps the value with the lowest mean T_next. A coarse grid can miss the
best by far (issue 27: `traj_async` on a growing-context trace changed 2x between 16 and 32
slots), so a numeric sweep can be *refined* (`refine_sweep`): after the coarse pass, the
values between the best one's neighbours in steps of at most `step` run too, so the best is
known to within `step` (one pass: the optimum is taken to lie between the best coarse value's
neighbours; a best at the grid's edge gets two more values past it).

*Figures*: with a `record_dir`, `run_seeds` records each policy's run of the first seed to a
run directory of its own (`record_dir/<run_dir_name(policy)>`, steps, events and engine
samples; no trajectories) for the comparison figures of `rollout.observe.bench_plots`.
Recording changes no timing: those runs' summaries are the table's.

*Processes*: every run is a `PlannedRun` (its config, overrides and seed, the policy, where to
record it) that `run_planned` plans and runs from scratch, so `run_seeds(jobs=N)` can hand the
runs to N worker processes and still return the summaries one process would, in its order.

*Weak scaling* (`run_weak_scaling`, `scripts/weak_scaling.py`) runs the first policy of a
config on N = 1, 8, 64, ... engines with the work per engine fixed: `weak_scaling_overrides`
multiplies B (groups_per_step), the engines and the env nodes by N. Each run's wall time is
measured too, so the simulator's own cost at scale is visible.
"""

from __future__ import annotations

import functools
import multiprocessing
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path

from foundation.config import load_config
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import default_policy_registry
from rollout.jobs.simulation import PolicyRun, simulate_policy
from rollout.jobs.simulation_plan import Simulation, plan_simulation
from rollout.observe.run_summary import RunSummary
from rollout.runtime.policy import RolloutPolicy
from rollout.simulation.vtime import run_virtual

__all__ = [
    "PlannedRun",
    "Ratio",
    "SeedSpread",
    "Spread",
    "Variant",
    "WeakScalingRow",
    "best_lines",
    "best_of_sweeps",
    "comparison_rows",
    "markdown_table",
    "parse_sweep",
    "plan_runs",
    "ratios_to_ours",
    "refine_sweep",
    "refined_values",
    "run_dir_name",
    "run_planned",
    "run_seeds",
    "run_weak_scaling",
    "simulate_planned",
    "spread",
    "weak_scaling_notes",
    "weak_scaling_overrides",
    "weak_scaling_rows",
]


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean, smallest and largest of one figure over seeds."""

    mean: float
    low: float
    high: float

    def text(self, unit: str = "", digits: int = 1) -> str:
        return f"{self.mean:,.{digits}f}{unit} [{self.low:,.{digits}f}–{self.high:,.{digits}f}]"


@dataclass(frozen=True, slots=True)
class Ratio:
    """baseline ÷ ours per seed (> 1: ours is faster), summarised."""

    spread: Spread

    @property
    def decisive(self) -> bool:
        """The whole spread is on one side of 1: the ratio counts."""
        return self.spread.low > 1.0 or self.spread.high < 1.0


@dataclass(frozen=True, slots=True)
class Variant:
    """A policy run with config overrides of its own (one value of a swept knob)."""

    label: str
    policy: str
    overrides: tuple[str, ...] = ()


def parse_sweep(text: str) -> list[Variant]:
    """`POLICY:KEY=V1,V2,...` as one variant per value (ValueError says the expected form); a
    value in brackets may hold commas (`conductor:rollout.overrides=[a=1, b=2],[a=2]`)."""
    policy, _, assignment = text.partition(":")
    key, _, values = assignment.partition("=")
    choices = [value.strip() for value in _top_level_split(values) if value.strip()]
    if not policy or not key or not choices:
        raise ValueError(
            "a sweep is POLICY:KEY=V1,V2,... (e.g. traj_async:conductor.agent_slots=8,16), "
            f"got {text!r}"
        )
    knob = key.rsplit(".", 1)[-1]
    return [
        Variant(f"{policy}[{_label(knob, value)}]", policy, (f"{key}={value}",))
        for value in choices
    ]


def _top_level_split(values: str) -> list[str]:
    """`values` split at the commas outside brackets and braces, so that one value may be a
    list of overrides: `[a=1, b=2],[a=2, b=2]` is two values."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(values):
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(values[start:at])
            start = at + 1
    parts.append(values[start:])
    return parts


_ONE_OVERRIDE = re.compile(r"^\[\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(\d+)\s*\]$")


def refined_values(values: Sequence[int], best: int, step: int) -> list[int]:
    """The values a refinement adds, ascending: `best` ± multiples of `step` strictly between
    its neighbours in `values`, and at an edge of the grid two steps past it (at least 1);
    none run already."""
    if step < 1:
        raise ValueError(f"a refinement step must be at least 1, got {step}")
    grid = sorted(set(values))
    if best not in grid:
        raise ValueError(f"the best value {best} is not one of the sweep's {grid}")
    at = grid.index(best)
    edge = 2 * step + 1  # two steps past an edge (exclusive bound)
    low = grid[at - 1] if at > 0 else best - edge
    high = grid[at + 1] if at + 1 < len(grid) else best + edge
    below = range(best - step, max(low, 0), -step)
    above = range(best + step, high, step)
    return sorted(value for value in (*below, *above) if value not in grid)


def refine_sweep(text: str, results: Sequence[SeedSpread], step: int) -> list[Variant]:
    """The variants that refine sweep `text` around its best value so far (`refined_values`):
    its values must be whole numbers or one-item overrides `[key=N]` (else no refinement)."""
    variants = parse_sweep(text)
    policy, _, assignment = text.partition(":")
    key, _, _ = assignment.partition("=")
    numbers: list[int] = []
    inner = ""
    for variant in variants:
        value = variant.overrides[0].split("=", 1)[1].strip()
        match = _ONE_OVERRIDE.match(value)
        if value.isdigit():
            numbers.append(int(value))
        elif match is not None and inner in ("", match.group(1)):
            inner = match.group(1)
            numbers.append(int(match.group(2)))
        else:
            return []
    means = {r.policy: r.t_next().mean for r in results}
    ran = [(means[v.label], n) for v, n in zip(variants, numbers, strict=True) if v.label in means]
    if not ran:
        return []
    best = min(ran)[1]
    fine = refined_values(numbers, best, step)
    choices = [f"[{inner}={value}]" if inner else str(value) for value in fine]
    return parse_sweep(f"{policy}:{key}={','.join(choices)}") if choices else []


def _label(knob: str, value: str) -> str:
    """`knob=value`, or the override itself when the value is a one-item override list
    (`engine.overrides=[max_running_requests=8]` reads `max_running_requests=8`)."""
    inner = value[1:-1].strip() if value.startswith("[") and value.endswith("]") else ""
    return inner if "=" in inner else f"{knob}={value}"


def best_of_sweeps(results: Sequence[SeedSpread], variants: Sequence[Variant]) -> dict[str, str]:
    """For each swept policy, the label with the lowest mean T_next among its variants and the
    policy itself at its config's setting, when that ran too as a baseline (a sweep below the
    default must not hide a better default); `results[0]` is ours."""
    by_label = {result.policy: result for result in results[1:]}  # not ours: it has no ratio
    best: dict[str, str] = {}
    for variant in variants:
        for label in (variant.policy, variant.label):
            if label not in by_label:
                continue
            current = best.get(variant.policy)
            mean = by_label[label].t_next().mean
            if current is None or mean < by_label[current].t_next().mean:
                best[variant.policy] = label
    return best


@dataclass(frozen=True, slots=True)
class SeedSpread:
    """One policy (or swept variant) over the seeds."""

    policy: str
    summaries: tuple[RunSummary, ...]
    run_dir: Path | None = None  # the first seed's recorded run (with `run_seeds(record_dir=)`)

    def t_next(self) -> Spread:
        return spread([s.mean_t_next_s for s in self.summaries])

    def figure(self, pick: Callable[[RunSummary], float | None]) -> Spread | None:
        values = [pick(s) for s in self.summaries]
        known = [v for v in values if v is not None]
        return spread(known) if known else None


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("a spread needs at least one value")
    return Spread(statistics.fmean(values), min(values), max(values))


def best_lines(
    results: Sequence[SeedSpread], variants: Sequence[Variant], ratios: Mapping[str, Ratio]
) -> list[str]:
    """One line per swept baseline: its best variant, that variant's ratio to ours, and its
    headroom, T_next ÷ the floor of the samples it consumed: no policy consuming those samples
    on the same engine settings (slots, KV pool) can beat it by more (SIMULATED,
    `rollout.simulation.lower_bound`)."""
    by_label = {result.policy: result for result in results}
    lines = []
    for policy, label in best_of_sweeps(results, variants).items():
        ratio = ratios[label]
        line = (
            f"best {policy}: {label}, ÷ ours {ratio.spread.text('×', digits=2)} "
            f"(counts: {'yes' if ratio.decisive else 'no'})"
        )
        headroom = by_label[label].figure(lambda s: s.over_floor)
        if headroom is not None:
            line += (
                f"; it runs at {headroom.text('×', digits=2)} the floor of the samples it "
                "consumed: on its engine settings, no policy consuming those samples beats it "
                "by more"
            )
        lines.append(line)
    return lines


def ratios_to_ours(results: Sequence[SeedSpread]) -> Mapping[str, Ratio]:
    """Each baseline's T_next over ours (the first policy), seed by seed."""
    ours, *baselines = results
    return {
        result.policy: Ratio(
            spread(
                [
                    theirs.mean_t_next_s / mine.mean_t_next_s
                    for theirs, mine in zip(result.summaries, ours.summaries, strict=True)
                ]
            )
        )
        for result in baselines
    }


def run_dir_name(policy: str) -> str:
    """A file-system-safe directory name for a policy or variant label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", policy).strip("_") or "policy"


def run_seeds(
    config_path: Path,
    overrides: Sequence[str],
    seeds: Sequence[int],
    *,
    variants: Sequence[Variant] = (),
    progress: Callable[[str], None] = lambda _: None,
    record_dir: Path | None = None,
    config_policies: bool = True,
    jobs: int = 1,
) -> list[SeedSpread]:
    """Every policy of the config at `config_path` (unless `config_policies` is off: a
    refinement pass), then every variant, on every seed; with `record_dir`, the first seed's
    runs are recorded there (module doc). `jobs` > 1 runs that many at once, each in a process
    of its own: every run is planned from its config and seed alone, so the summaries are the
    same as one at a time, in the same order."""
    if not seeds:
        raise ValueError("give at least one seed")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    planned = plan_runs(config_path, overrides, seeds, variants, record_dir, config_policies)
    summaries: list[RunSummary | None] = [None] * len(planned)
    if jobs == 1:
        for at, run in enumerate(planned):
            progress(f"seed {run.seed}: {run.name}")
            summaries[at] = run_planned(run)
    else:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(run_planned, run): at for at, run in enumerate(planned)}
            progress(f"0 of {len(planned)} runs done, {jobs} at once")
            for done, future in enumerate(as_completed(futures), start=1):
                run = planned[futures[future]]
                summaries[futures[future]] = future.result()
                progress(f"{done} of {len(planned)} runs done (last: seed {run.seed}: {run.name})")
    per_policy: dict[str, list[RunSummary]] = {}
    recorded: dict[str, Path] = {}
    for run, summary in zip(planned, summaries, strict=True):
        assert summary is not None
        per_policy.setdefault(run.name, []).append(summary)
        if run.run_dir is not None:
            recorded[run.name] = run.run_dir
    return [
        SeedSpread(name, tuple(found), recorded.get(name)) for name, found in per_policy.items()
    ]


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """One simulated run of a bench, all a worker process needs to plan and run it again:
    the config, its overrides (the seed's included), which policy, where to record it."""

    config_path: Path
    overrides: tuple[str, ...]
    seed: int
    name: str  # the policy's name, or the variant's label
    policy_index: int | None  # the config's policy at this index, else `variant`'s
    variant: Variant | None = None
    run_dir: Path | None = None


def plan_runs(
    config_path: Path,
    overrides: Sequence[str],
    seeds: Sequence[int],
    variants: Sequence[Variant],
    record_dir: Path | None,
    config_policies: bool,
) -> list[PlannedRun]:
    """Every run of `run_seeds`, seed by seed, in table order; the recording directories are
    checked here, before any run starts."""
    planned: list[PlannedRun] = []
    taken: set[Path] = set()
    names = (  # the config's policies, the same on every seed
        [policy.name for policy in plan_simulation(config_path, [*overrides]).policies]
        if config_policies
        else []
    )
    for index, seed in enumerate(seeds):
        base = (*overrides, f"seed={seed}")
        runs = [
            PlannedRun(config_path, base, seed, name, policy_index=at)
            for at, name in enumerate(names)
        ]
        runs += [
            PlannedRun(
                config_path,
                (*overrides, *variant.overrides, f"seed={seed}"),
                seed,
                variant.label,
                policy_index=None,
                variant=variant,
            )
            for variant in variants
        ]
        for run in runs:
            if record_dir is not None and index == 0:
                run_dir = record_dir / run_dir_name(run.name)
                if run_dir in taken or (run_dir.exists() and any(run_dir.iterdir())):
                    raise ValueError(f"{run_dir} is taken (a run directory must start empty)")
                taken.add(run_dir)
                run = replace(run, run_dir=run_dir)
            planned.append(run)
    return planned


def run_planned(run: PlannedRun) -> RunSummary:
    """Plan `run` from its config and run it in virtual time (in this process or a worker)."""
    return simulate_planned(run).summary


def simulate_planned(run: PlannedRun) -> PolicyRun:
    """`run_planned`'s whole outcome: the summary and what else the run reports (its engines'
    final stats among them)."""
    simulation = plan_simulation(run.config_path, list(run.overrides))
    if run.variant is not None:
        policy = _variant_policy(simulation, run.variant)
    else:
        assert run.policy_index is not None
        policy = simulation.policies[run.policy_index]
    if run.run_dir is not None:
        quiet = simulation.config.model_copy(update={"write_trajectories": False})
        simulation = replace(simulation, config=quiet)
    return run_virtual(simulate_policy(simulation, policy, run_dir=run.run_dir))


def _variant_policy(simulation: Simulation, variant: Variant) -> RolloutPolicy:
    """The policy a variant tunes (one of the config's own, else any the registry knows),
    under the variant's label."""
    named = {policy.name: policy for policy in simulation.policies}
    policy = named.get(variant.policy) or default_policy_registry().resolve(
        variant.policy, simulation.base_dir
    )
    return policy.renamed(variant.label)


COLUMNS = ("policy", "T_next", "÷ ours", "counts", "÷ floor", "forwards", "extra work", "idle",
           "length bias", "p90 length bias",
           "reward bias", "staleness",
           "E_rollout", "busy", "KV hit device", "KV hit host", "recomputed tokens",
           "of which after updates", "decode batch", "preemptions")  # fmt: skip


def comparison_rows(
    results: Sequence[SeedSpread], ratios: Mapping[str, Ratio]
) -> tuple[tuple[str, ...], list[list[str]]]:
    """The comparison table as text cells: `COLUMNS`, then one row per policy."""
    rows = []
    for result in results:
        ratio = ratios.get(result.policy)

        def cell(pick: Callable[[RunSummary], float | None], digits: int) -> str:
            figure = result.figure(pick)  # noqa: B023 (used at once)
            return "—" if figure is None else figure.text(digits=digits)

        rows.append(
            [
                result.policy,
                result.t_next().text(" s"),
                "—" if ratio is None else ratio.spread.text("×", digits=2),
                "—" if ratio is None else ("yes" if ratio.decisive else "no"),
                cell(lambda s: s.over_floor, 2),
                *(cell(functools.partial(_gap_part, part=i), 3) for i in range(3)),
                cell(lambda s: s.length_bias, 3),
                cell(lambda s: s.length_bias_p90, 3),
                cell(lambda s: s.reward_bias, 3),
                cell(lambda s: s.staleness_mean, 2),
                cell(lambda s: s.e_rollout, 3),
                cell(lambda s: s.busy_fraction, 3),
                cell(lambda s: s.kv_device_hit_rate, 3),
                cell(lambda s: s.kv_host_hit_rate, 3),
                cell(lambda s: float(s.recomputed_tokens), 0),
                cell(lambda s: float(s.recomputed_after_update_tokens), 0),
                cell(lambda s: s.decode_batch_mean, 1),
                cell(lambda s: float(s.preemptions), 0),
            ]
        )
    return COLUMNS, rows


def _gap_part(summary: RunSummary, *, part: int) -> float | None:
    """Forwards, extra work or idle (0, 1, 2) of the run's gap to its floor, ÷ the floor."""
    gap = summary.floor_gap
    return None if gap is None else gap.parts_of_floor[part]


def markdown_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
) -> str:
    """A titled Markdown table (pipes in cells escaped), then one line per note."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    parts = [f"**{title}**", "", line(columns), line(["---"] * len(columns))]
    parts += [line(row) for row in rows]
    parts += ["", *notes, "", ""]
    return "\n".join(parts)


def weak_scaling_overrides(base: SimulateConfig, engines: int) -> tuple[str, ...]:
    """Overrides that scale `base` (its per-engine unit) to `engines` engines at fixed work per
    engine: B, the engines and the env nodes times `engines` (node capacity stays per node)."""
    if engines < 1:
        raise ValueError(f"weak scaling needs at least one engine per run, got {engines}")
    cluster = base.cluster
    return (
        f"groups_per_step={base.groups_per_step * engines}",
        f"cluster.engines={cluster.engines * engines}",
        f"cluster.env_nodes={cluster.env_nodes * engines}",
    )


@dataclass(frozen=True, slots=True)
class WeakScalingRow:
    """One cluster size's run: SIMULATED figures (virtual seconds) and its wall time."""

    engines: int
    env_nodes: int
    groups_per_step: int
    summary: RunSummary
    busy_low: float | None  # the least busy engine
    busy_high: float | None  # the busiest engine
    start_wait_s_mean: float | None  # None without an env fleet
    act_wait_s_mean: float | None  # None without an env fleet
    wall_s: float


def run_weak_scaling(
    config_path: Path,
    overrides: Sequence[str],
    engine_counts: Sequence[int],
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[Simulation, list[WeakScalingRow]]:
    """The config's first policy at each cluster size of `engine_counts` (see module doc);
    returns the unscaled per-engine unit (for its cost model and notes) and one row per size."""
    if not engine_counts:
        raise ValueError("give at least one cluster size (engines), e.g. 1,8,64")
    base = load_config(SimulateConfig, config_path, list(overrides))
    rows: list[WeakScalingRow] = []
    for engines in engine_counts:
        scaled = [*overrides, *weak_scaling_overrides(base, engines)]
        simulation = plan_simulation(config_path, scaled)
        cluster = simulation.config.cluster
        progress(f"{cluster.engines} engines, {cluster.env_nodes} env nodes")
        policy = simulation.policies[0]
        started = time.perf_counter()
        run = run_virtual(simulate_policy(simulation, policy))
        wall_s = time.perf_counter() - started
        busy = [f.busy_fraction for f in run.engines if f.busy_fraction is not None]
        rows.append(
            WeakScalingRow(
                engines=cluster.engines,
                env_nodes=cluster.env_nodes,
                groups_per_step=simulation.config.groups_per_step,
                summary=run.summary,
                busy_low=min(busy) if busy else None,
                busy_high=max(busy) if busy else None,
                start_wait_s_mean=run.fleet.start_wait_s_mean if run.fleet else None,
                act_wait_s_mean=run.fleet.act_wait_s_mean if run.fleet else None,
                wall_s=wall_s,
            )
        )
    return plan_simulation(config_path, list(overrides)), rows


WEAK_SCALING_COLUMNS = ("engines", "env nodes", "B", "samples", "T_next mean", "÷ 1st",
                        "busy (mean)", "busy [min–max]", "E_rollout", "length bias",
                        "start wait mean", "act wait mean", "preemptions", "wall")  # fmt: skip


def weak_scaling_rows(rows: Sequence[WeakScalingRow]) -> list[list[str]]:
    """The weak-scaling table as text cells, one row per cluster size (`WEAK_SCALING_COLUMNS`)."""

    def number(value: float | None, digits: int, unit: str = "") -> str:
        return "—" if value is None else f"{value:,.{digits}f}{unit}"

    first = rows[0].summary.mean_t_next_s if rows else float("nan")
    cells = []
    for row in rows:
        summary = row.summary
        spread_text = (
            "—"
            if row.busy_low is None or row.busy_high is None
            else f"{row.busy_low:.3f}–{row.busy_high:.3f}"
        )
        cells.append(
            [
                str(row.engines),
                str(row.env_nodes),
                str(row.groups_per_step),
                f"{summary.samples:,}",
                number(summary.mean_t_next_s, 1, " s"),
                number(summary.mean_t_next_s / first, 2, "×"),
                number(summary.busy_fraction, 3),
                spread_text,
                number(summary.e_rollout, 3),
                number(summary.length_bias, 3),
                number(row.start_wait_s_mean, 2, " s"),
                number(row.act_wait_s_mean, 2, " s"),
                f"{summary.preemptions:,}",
                number(row.wall_s, 1, " s wall"),
            ]
        )
    return cells


def weak_scaling_notes(simulation: Simulation) -> list[str]:
    """What the figures rest on: the SIMULATED label and the cost model and cluster unit."""
    model, engine, cost = simulation.model, simulation.engine, simulation.model.cost
    config = simulation.config
    node = config.cluster.node
    return [
        "SIMULATED: virtual time on the cost model, not hardware; wall = elapsed seconds of "
        "the whole run on the machine that ran it (the simulator's own cost).",
        f"Cost model ({model.name} on {model.gpu.name}): step = t_fix {cost.t_fix_s:g} s + "
        f"max(t_weights {cost.t_weights_s:g} s, N·b_c {cost.b_c_s:g} s) + N·b_tok "
        f"{cost.b_tok_s:g} s + c_dec {cost.c_dec_s:g} s·ΣL + c_pf {cost.c_pf_s:g} s·Σn(p+n/2); "
        f"KV pool {model.kv_capacity_tokens(engine.page_tokens):,} tokens per engine, "
        f"{engine.max_running_requests} slots per engine.",
        f"Per engine: B = {config.groups_per_step} groups of K = {config.group_size}, "
        f"{config.cluster.env_nodes} env node(s) (start_concurrency {node.start_concurrency}, "
        f"start_s {node.start_s:g} s, act_slots {node.act_slots}); workload "
        f"{simulation.workload.name}, {config.steps} steps, async_factor {config.async_factor}, "
        f"train_time_s {config.trainer.train_time_s:g}, seed {config.seed}, policy "
        f"{simulation.policies[0].name}.",
    ]
