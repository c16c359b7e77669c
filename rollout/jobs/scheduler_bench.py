"""`conductor bench scheduler`: how long the pure decision core takes per event, at scale.

A seeded, virtual-time rollout (`SyntheticRollout`) drives the real `RolloutScheduler`,
`PriorityKeeper` and `AdmissionController` the way the conductor and the agent loops do
(rollout/runtime/conductor.py, dispatch.py, agent_loop.py): samples are admitted with their
group, generate, run a tool, report the turn boundary (prediction + critical-group refresh),
finish; engines report stats after every completion; the trainer consumes B ready groups, which
pauses every engine for a weight update (in-flight generations come back aborted) and admits the
next groups; preemptions come back as aborted generations after `abort_delay_s`. Nothing is
executed but the decisions; every core call is timed with `time.perf_counter_ns` and reported per
event kind (p50 / p99 / max). The same stream, recorded decision by decision, is the golden test
of the scheduler (tests/rollout/core/test_scheduler_golden.py).
"""

from __future__ import annotations

import heapq
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import Field, model_validator

from foundation.config import FrozenConfig
from rollout.core.admission import AdmissionController
from rollout.core.config import (
    AdmissionConfig,
    PriorityConfig,
    SchedulerConfig,
    SiblingPredictorConfig,
)
from rollout.core.predictors.sibling import SiblingPredictor
from rollout.core.priority_keeper import PriorityKeeper
from rollout.core.scheduler import RolloutScheduler
from rollout.core.scheduler_events import (
    ActFinished,
    ActStarted,
    Decision,
    EngineAdded,
    EngineLoad,
    EnginePaused,
    EngineResumed,
    EngineStatsUpdated,
    GenerationAborted,
    GenerationFinished,
    Preempt,
    PrioritiesChanged,
    PriorityChanged,
    SampleAdmitted,
    SchedulerEvent,
    StartGeneration,
)
from rollout.core.types import Group, SampleProgress, Trajectory, Turn

__all__ = [
    "BenchScale",
    "KindLatency",
    "ScaleResult",
    "SchedulerBenchConfig",
    "SchedulerBenchWorkload",
    "SyntheticRollout",
    "decision_line",
    "latency_rows",
    "markdown_table",
    "run_scheduler_bench",
    "to_json",
]

CallObserver = Callable[[str, int, int, tuple[Decision, ...]], None]
"""Told of every timed core call: (event kind, wall ns, CPU ns, the decisions it returned)."""


def _clock_ns() -> tuple[int, int]:
    """Wall clock (`perf_counter_ns`) and this thread's CPU time: on a shared machine the
    wall time includes other processes' turns on the core, the CPU time does not. The CPU
    clock is a system call (about 1 µs, far more on a loaded machine), so the wall readings
    sit inside the CPU ones and never time it."""
    cpu_ns = time.thread_time_ns()
    return time.perf_counter_ns(), cpu_ns


def _clock_end_ns() -> tuple[int, int]:
    """As `_clock_ns`, read in the opposite order (wall first) at the end of a call."""
    wall_ns = time.perf_counter_ns()
    return wall_ns, time.thread_time_ns()


class BenchScale(FrozenConfig):
    """One scale of the benchmark: the live population and the engines."""

    groups: int = Field(
        ge=1, description="Live groups admitted at once, async_factor × B (groups)."
    )
    group_size: int = Field(default=10, ge=1, description="K: samples per group (samples).")
    engines: int = Field(default=64, ge=1, description="Engines, each with its own slots.")
    slots_per_engine: int = Field(
        ge=1, description="Generation slots (max_running_requests) per engine (requests)."
    )
    async_factor: int = Field(
        default=4,
        ge=1,
        description="Staleness bound; B = groups / async_factor groups make a training step.",
    )

    @model_validator(mode="after")
    def _batch_is_whole(self) -> BenchScale:
        if self.groups % self.async_factor:
            raise ValueError(
                f"groups ({self.groups}) must be a multiple of async_factor ({self.async_factor}) "
                "so that B = groups / async_factor is whole"
            )
        return self

    @property
    def live_samples(self) -> int:
        return self.groups * self.group_size

    @property
    def groups_per_step(self) -> int:
        return self.groups // self.async_factor

    @property
    def label(self) -> str:
        return (
            f"{self.live_samples:,} samples, {self.groups:,} groups × {self.group_size}, "
            f"{self.engines} engines × {self.slots_per_engine} slots"
        )


class SchedulerBenchWorkload(FrozenConfig):
    """The synthetic agentic workload (virtual time; no model, no tool is run)."""

    mean_turns: float = Field(default=8.0, gt=0.0, description="Mean turns per sample (turns).")
    group_spread: float = Field(
        default=0.6,
        ge=0.0,
        description="Log-normal sigma of a group's typical length: siblings are alike (log).",
    )
    sample_spread: float = Field(
        default=0.4, ge=0.0, description="Log-normal sigma of a sample around its group (log)."
    )
    prompt_tokens: int = Field(default=1024, ge=1, description="First context (tokens).")
    mean_turn_tokens: float = Field(
        default=250.0, gt=0.0, description="Mean generated tokens per turn (tokens)."
    )
    mean_observation_tokens: float = Field(
        default=300.0, ge=0.0, description="Mean tool-observation tokens per turn (tokens)."
    )
    decode_tokens_per_s: float = Field(
        default=40.0, gt=0.0, description="Decode rate of one request (tokens/s)."
    )
    mean_act_s: float = Field(default=3.0, gt=0.0, description="Mean tool time (s).")
    mean_pre_act_s: float = Field(
        default=0.05, ge=0.0, description="Mean wait for an act slot / container (s)."
    )
    mean_env_init_s: float = Field(
        default=1.0, ge=0.0, description="Mean container start before admission (s)."
    )
    abort_delay_s: float = Field(
        default=0.05, ge=0.0, description="How long an abort takes to come back (s)."
    )
    kv_capacity_tokens: int = Field(
        default=2_000_000, ge=0, description="Device KV pool per engine (tokens)."
    )
    host_kv_capacity_tokens: int = Field(
        default=8_000_000, ge=0, description="Host KV tier per engine (tokens)."
    )
    weight_updates: bool = Field(
        default=True,
        description="Each consumed batch pauses every engine (in-flight generations abort).",
    )


class SchedulerBenchConfig(FrozenConfig):
    """`conductor bench scheduler` (configs/bench/scheduler.yaml)."""

    scales: tuple[BenchScale, ...] = Field(
        default=(
            BenchScale(groups=100, engines=64, slots_per_engine=8),
            BenchScale(groups=1000, engines=64, slots_per_engine=80),
        ),
        min_length=1,
        description="The scales measured, one table section each.",
    )
    warmup_events: int = Field(
        default=20_000, ge=0, description="Events run before timing starts (events)."
    )
    measured_events: int = Field(
        default=20_000, ge=1, description="Events timed at each scale (events)."
    )
    seed: int = Field(default=0, description="Seed of the workload and of admission.")
    workload: SchedulerBenchWorkload = Field(default_factory=SchedulerBenchWorkload)
    scheduler: SchedulerConfig = Field(
        default_factory=SchedulerConfig, description="The scheduler under test."
    )
    priority: PriorityConfig = Field(
        default_factory=PriorityConfig, description="Critical groups under test."
    )
    predictor: SiblingPredictorConfig = Field(
        default_factory=SiblingPredictorConfig, description="The length predictor (sibling)."
    )
    target_p99_us: float = Field(
        default=200.0, gt=0.0, description="p99 per core call the table checks against (µs)."
    )


# -- the synthetic rollout ------------------------------------------------------------------


@dataclass(slots=True)
class _SimSample:
    sample_id: str
    group_id: str
    prompt_index: int
    index: int
    turns_total: int
    context_tokens: int
    turns_done: int = 0
    gen_tokens: int = 0
    obs_tokens: int = 0
    turn_left_tokens: int = 0  # of the current turn, still to decode
    epoch: int = 0  # bumped per outcome, so a stale future event is ignored
    engine: str | None = None
    gen_started_s: float = 0.0


@dataclass(order=True, slots=True)
class _Future:
    at_s: float
    seq: int
    kind: str = field(compare=False)
    sample_id: str = field(compare=False, default="")
    epoch: int = field(compare=False, default=0)


class SyntheticRollout:
    """A virtual-time rollout around the pure cores; `run(events)` processes future events.

    Every core call goes through `_timed`, which tells `observer` its kind, duration and the
    decisions it returned. Deterministic for a seed (the cores are; the workload is seeded).
    """

    def __init__(
        self,
        config: SchedulerBenchConfig,
        scale: BenchScale,
        observer: CallObserver,
        *,
        scheduler_config: SchedulerConfig | None = None,
    ) -> None:
        self._config, self._scale, self._work = config, scale, config.workload
        self._observer = observer
        self._rng = random.Random(config.seed)
        admission = AdmissionConfig(
            groups_per_step=scale.groups_per_step,
            group_size=scale.group_size,
            async_factor=scale.async_factor,
            shuffle=False,
            seed=config.seed,
        )
        self.scheduler = RolloutScheduler(scheduler_config or config.scheduler)
        self.keeper = PriorityKeeper(
            admission, config.priority, SiblingPredictor(config.predictor), enabled=True
        )
        self.admission = AdmissionController(admission, num_prompts=1_000_000)
        self._engines = [f"e{i:02d}" for i in range(scale.engines)]
        self._running: dict[str, dict[str, int]] = {name: {} for name in self._engines}
        self._samples: dict[str, _SimSample] = {}
        self._group_left: dict[str, int] = {}
        self._ready: list[str] = []
        self._futures: list[_Future] = []
        self._seq = 0
        self.now_s = 0.0

    # -- driving ---------------------------------------------------------------------------

    def start(self) -> None:
        """Add the engines and admit the first groups."""
        for name in self._engines:
            self._handle("engine added", EngineAdded(name, self._load(name), self.now_s))
        self._admit()

    def run(self, events: int) -> int:
        """Process up to `events` future events; returns how many were processed."""
        done = 0
        while done < events and self._futures:
            future = heapq.heappop(self._futures)
            self.now_s = future.at_s
            if self._process(future):
                done += 1
        return done

    def _process(self, future: _Future) -> bool:
        if future.kind == "admit":
            self._sample_admitted(future.sample_id)
            return True
        sample = self._samples.get(future.sample_id)
        if sample is None or sample.epoch != future.epoch:
            return False  # overtaken (an abort, a pause or a finish came first)
        sample.epoch += 1
        match future.kind:
            case "gen_done":
                self._generation_done(sample)
            case "aborted":
                self._aborted(sample)
            case "act_start":
                self._handle("act started", ActStarted(sample.sample_id, self.now_s))
                self._at(self._exp(self._work.mean_act_s), "act_done", sample)
            case "act_done":
                self._act_done(sample)
        return True

    # -- what the agent loops and the conductor report ----------------------------------------

    def _sample_admitted(self, sample_id: str) -> None:
        sample = self._samples[sample_id]
        event = SampleAdmitted(sample_id, sample.group_id, self.now_s, sample.context_tokens)
        self._handle("sample admitted", event)

    def _generation_done(self, sample: _SimSample) -> None:
        engine = self._stop_generating(sample)
        produced = sample.turn_left_tokens
        sample.gen_tokens += produced
        sample.context_tokens += produced
        sample.turn_left_tokens = 0
        sample.turns_done += 1
        event = GenerationFinished(
            sample.sample_id, now_s=self.now_s, context_tokens=sample.context_tokens
        )
        self._handle("generation finished", event)
        self._handle("engine stats", EngineStatsUpdated(engine, self._load(engine), self.now_s))
        self._at(self._exp(self._work.mean_pre_act_s), "act_start", sample)

    def _aborted(self, sample: _SimSample) -> None:
        partial = self._partial_tokens(sample)
        self._stop_generating(sample)
        sample.turn_left_tokens -= partial
        sample.gen_tokens += partial
        sample.context_tokens += partial
        event = GenerationAborted(sample.sample_id, partial, self.now_s)
        self._handle("generation aborted", event)

    def _act_done(self, sample: _SimSample) -> None:
        if sample.turns_done >= sample.turns_total:
            event = ActFinished(sample.sample_id, episode_done=True, now_s=self.now_s)
            self._handle("sample finished", event)
            self._sample_finished(sample)
            return
        observation = max(1, round(self._exp(self._work.mean_observation_tokens)))
        sample.obs_tokens += observation
        sample.context_tokens += observation
        event = ActFinished(
            sample.sample_id, now_s=self.now_s, context_tokens=sample.context_tokens
        )
        self._handle("act finished", event)
        progress = SampleProgress(
            sample.sample_id,
            sample.group_id,
            sample.turns_done,
            sample.gen_tokens,
            sample.context_tokens,
            sample.obs_tokens,
        )
        started = _clock_ns()
        self.keeper.update(progress)
        assignment = self.keeper.refresh(self.admission.training_step)
        self._observe("turn boundary (priority)", started, ())
        if assignment is not None:
            self._handle("priorities changed", PrioritiesChanged(assignment, self.now_s))

    def _sample_finished(self, sample: _SimSample) -> None:
        del self._samples[sample.sample_id]
        trajectory = _trajectory(sample)
        started = _clock_ns()
        self.keeper.sample_finished(trajectory)
        self._group_left[sample.group_id] -= 1
        ready = self._group_left[sample.group_id] == 0
        if ready:
            self.keeper.group_ready(sample.group_id)
        assignment = self.keeper.refresh(self.admission.training_step)
        self._observe("sample finished (priority)", started, ())
        if assignment is not None:
            self._handle("priorities changed", PrioritiesChanged(assignment, self.now_s))
        if ready:
            del self._group_left[sample.group_id]
            self._ready.append(sample.group_id)
            if len(self._ready) >= self._scale.groups_per_step:
                self._training_step()

    def _training_step(self) -> None:
        """The trainer takes B ready groups: a weight update, then the next groups."""
        batch = self._ready[: self._scale.groups_per_step]
        del self._ready[: len(batch)]
        started = _clock_ns()
        self.admission.consume(batch)
        for group_id in batch:
            self.keeper.group_consumed(group_id)
        self._observe("batch consumed (admission)", started, ())
        if self._work.weight_updates:
            for name in self._engines:
                self._handle("engine paused", EnginePaused(name, self.now_s))
                for sample_id in sorted(self._running[name]):
                    sample = self._samples[sample_id]
                    sample.epoch += 1  # its finish will not come
                    self._aborted(sample)
        self.admission.set_training_step(self.admission.training_step + 1)
        if self._work.weight_updates:
            for name in self._engines:
                self._handle("engine resumed", EngineResumed(name, self.now_s))
                self._handle("engine stats", EngineStatsUpdated(name, self._load(name), self.now_s))
        self._recompute_priorities()
        self._admit()

    def _admit(self) -> None:
        started = _clock_ns()
        groups = self.admission.admit()
        for group in groups:
            self.keeper.add_group(group)
        assignment = self.keeper.refresh(self.admission.training_step)
        self._observe("groups admitted (admission)", started, ())
        for group in groups:
            self._add_group(group)
        if assignment is not None:
            self._handle("priorities changed", PrioritiesChanged(assignment, self.now_s))

    def _recompute_priorities(self) -> None:
        started = _clock_ns()
        assignment = self.keeper.refresh(self.admission.training_step)
        self._observe("refresh (priority)", started, ())
        if assignment is not None:
            self._handle("priorities changed", PrioritiesChanged(assignment, self.now_s))

    def _add_group(self, group: Group) -> None:
        work = self._work
        typical = work.mean_turns * math.exp(self._rng.gauss(0.0, work.group_spread))
        self._group_left[group.group_id] = group.size
        for index, sample_id in enumerate(group.sample_ids()):
            turns = max(1, round(typical * math.exp(self._rng.gauss(0.0, work.sample_spread))))
            sample = _SimSample(
                sample_id, group.group_id, group.prompt_index, index, turns, work.prompt_tokens
            )
            self._samples[sample_id] = sample
            self._at(self._exp(work.mean_env_init_s), "admit", sample)

    def _observe(
        self, kind: str, started: tuple[int, int], decisions: tuple[Decision, ...]
    ) -> None:
        wall_ns, cpu_ns = _clock_end_ns()
        self._observer(kind, wall_ns - started[0], cpu_ns - started[1], decisions)

    # -- carrying out decisions ------------------------------------------------------------

    def _handle(self, kind: str, event: SchedulerEvent) -> None:
        started = _clock_ns()
        decisions = self.scheduler.handle(event)
        self._observe(kind, started, decisions)
        for decision in decisions:
            self._apply(decision)

    def _apply(self, decision: Decision) -> None:
        match decision:
            case StartGeneration(sample_id=sample_id, engine=engine):
                sample = self._samples[sample_id]
                if sample.turn_left_tokens <= 0:
                    mean = self._work.mean_turn_tokens
                    sample.turn_left_tokens = max(1, round(self._exp(mean)))
                sample.engine, sample.gen_started_s = engine, self.now_s
                self._running[engine][sample_id] = sample.context_tokens
                delay = sample.turn_left_tokens / self._work.decode_tokens_per_s
                self._at(delay, "gen_done", sample)
            case Preempt(sample_id=sample_id):
                self._at(self._work.abort_delay_s, "aborted", self._samples[sample_id])
            case PriorityChanged():
                pass  # the shell re-prioritizes the env lease: nothing the scheduler sees

    def _stop_generating(self, sample: _SimSample) -> str:
        assert sample.engine is not None
        self._running[sample.engine].pop(sample.sample_id, None)
        return sample.engine

    def _partial_tokens(self, sample: _SimSample) -> int:
        elapsed = self.now_s - sample.gen_started_s
        decoded = int(elapsed * self._work.decode_tokens_per_s)
        return max(0, min(sample.turn_left_tokens - 1, decoded))

    def _load(self, engine: str) -> EngineLoad:
        work = self._work
        used = sum(self._running[engine].values())
        capacity = work.kv_capacity_tokens
        headroom = 1.0 if not capacity else max(0.0, 1.0 - used / capacity)
        return EngineLoad(
            self._scale.slots_per_engine, headroom, capacity, work.host_kv_capacity_tokens
        )

    def _at(self, delay_s: float, kind: str, sample: _SimSample) -> None:
        self._seq += 1
        future = _Future(self.now_s + delay_s, self._seq, kind, sample.sample_id, sample.epoch)
        heapq.heappush(self._futures, future)

    def _exp(self, mean: float) -> float:
        return self._rng.expovariate(1.0 / mean) if mean > 0 else 0.0


def _trajectory(sample: _SimSample) -> Trajectory:
    """A token-light record of the finished sample: its turns and its generated-token count are
    what the predictor learns from (one prompt token, then the generated tokens)."""
    length = 1 + sample.gen_tokens
    per_turn = max(1, sample.gen_tokens // max(1, sample.turns_done))
    turns = tuple(
        Turn(
            index=i,
            gen_start=1 + i * per_turn,
            gen_end=1 + min(sample.gen_tokens, (i + 1) * per_turn),
        )
        for i in range(min(sample.turns_done, sample.gen_tokens))
    )
    return Trajectory(
        sample_id=sample.sample_id,
        group_id=sample.group_id,
        prompt_index=sample.prompt_index,
        sample_index=sample.index,
        token_ids=(0,) * length,
        loss_mask=(0,) + (1,) * sample.gen_tokens,
        logprobs=(0.0,) * length,
        versions=(-1,) + (0,) * sample.gen_tokens,
        prompt_tokens=1,
        turns=turns,
        reward=1.0,
        check_tokens=False,
    )


def decision_line(kind: str, decisions: Sequence[Decision]) -> str:
    """One readable line per core call: the event kind and every decision, exactly."""
    parts = [kind]
    for decision in decisions:
        match decision:
            case StartGeneration(sample_id=s, engine=e, high=high, resume=resume):
                parts.append(f"start {s}@{e}{' high' if high else ''}{' resume' if resume else ''}")
            case Preempt(sample_id=s, engine=e, reason=reason, for_sample_id=f):
                parts.append(f"preempt {s}@{e} for {f}: {reason}")
            case PriorityChanged(sample_id=s, high=high):
                parts.append(f"priority {s} {'high' if high else 'low'}")
    return " | ".join(parts)


# -- measuring ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KindLatency:
    """One event kind's latency over the measured calls (microseconds)."""

    kind: str
    calls: int
    p50_us: float
    p99_us: float
    max_us: float
    cpu_p50_us: float  # the same calls' CPU time (immune to other processes on the core)
    cpu_p99_us: float


@dataclass(frozen=True, slots=True)
class ScaleResult:
    scale: BenchScale
    kinds: tuple[KindLatency, ...]  # per kind, then "all" last
    decisions: int
    virtual_s: float
    wall_s: float

    @property
    def overall(self) -> KindLatency:
        return self.kinds[-1]


def _quantile_us(ordered_ns: list[int], q: float) -> float:
    """The nearest-rank q-quantile of sorted nanoseconds, in microseconds."""
    return ordered_ns[min(len(ordered_ns) - 1, math.ceil(q * len(ordered_ns)) - 1)] / 1000.0


def _summary(kind: str, wall_ns: list[int], cpu_ns: list[int]) -> KindLatency:
    wall, cpu = sorted(wall_ns), sorted(cpu_ns)
    return KindLatency(
        kind,
        len(wall),
        _quantile_us(wall, 0.50),
        _quantile_us(wall, 0.99),
        wall[-1] / 1000.0,
        _quantile_us(cpu, 0.50),
        _quantile_us(cpu, 0.99),
    )


@dataclass(slots=True)
class _Recorder:
    """Collects the timings of the measured phase."""

    measuring: bool = False
    decisions: int = 0
    wall_ns: dict[str, list[int]] = field(default_factory=dict)
    cpu_ns: dict[str, list[int]] = field(default_factory=dict)

    def observe(self, kind: str, wall_ns: int, cpu_ns: int, made: tuple[Decision, ...]) -> None:
        if self.measuring:
            self.wall_ns.setdefault(kind, []).append(wall_ns)
            self.cpu_ns.setdefault(kind, []).append(cpu_ns)
            self.decisions += len(made)


def run_scheduler_bench(
    config: SchedulerBenchConfig, progress: Callable[[int, int], None] | None = None
) -> list[ScaleResult]:
    """Run every scale; `progress(events_done, events_total)` is told as it goes."""
    total = len(config.scales) * (config.warmup_events + config.measured_events)
    done = 0
    results = []
    chunk = 500
    for scale in config.scales:
        recorder = _Recorder()
        rollout = SyntheticRollout(config, scale, recorder.observe)
        started_wall = time.perf_counter()
        rollout.start()
        started_virtual = rollout.now_s
        phases = ((config.warmup_events, False), (config.measured_events, True))
        for phase_events, measure in phases:
            recorder.measuring = measure
            started_virtual = rollout.now_s
            left = phase_events
            while left > 0:
                ran = rollout.run(min(chunk, left))
                done += ran
                left -= ran
                if progress is not None:
                    progress(done, total)
                if ran == 0:
                    break  # the rollout ran dry (cannot happen while groups are admitted)
        kinds = [
            _summary(kind, recorder.wall_ns[kind], recorder.cpu_ns[kind])
            for kind in sorted(recorder.wall_ns)
        ]
        every_wall = [ns for values in recorder.wall_ns.values() for ns in values]
        every_cpu = [ns for values in recorder.cpu_ns.values() for ns in values]
        results.append(
            ScaleResult(
                scale=scale,
                kinds=(*kinds, _summary("all", every_wall, every_cpu)),
                decisions=recorder.decisions,
                virtual_s=rollout.now_s - started_virtual,
                wall_s=time.perf_counter() - started_wall,
            )
        )
    return results


# -- reporting ------------------------------------------------------------------------------

COLUMNS = ("scale", "event kind", "calls", "p50 µs", "p99 µs", "max µs", "CPU p50 µs", "CPU p99 µs")


def latency_rows(results: Sequence[ScaleResult]) -> list[tuple[str, ...]]:
    """One row per (scale, kind), the overall row of each scale last."""
    rows: list[tuple[str, ...]] = []
    for result in results:
        for row in result.kinds:
            rows.append(
                (
                    f"{result.scale.live_samples:,} samples",
                    row.kind,
                    f"{row.calls:,}",
                    f"{row.p50_us:.1f}",
                    f"{row.p99_us:.1f}",
                    f"{row.max_us:.1f}",
                    f"{row.cpu_p50_us:.1f}",
                    f"{row.cpu_p99_us:.1f}",
                )
            )
    return rows


def markdown_table(title: str, results: Sequence[ScaleResult]) -> str:
    lines = [f"**{title}**", "", "| " + " | ".join(COLUMNS) + " |"]
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in latency_rows(results))
    return "\n".join(lines) + "\n\n"


def to_json(config: SchedulerBenchConfig, results: Sequence[ScaleResult]) -> str:
    record = {
        "config": config.model_dump(mode="json"),
        "scales": [
            {
                "scale": result.scale.model_dump(mode="json"),
                "live_samples": result.scale.live_samples,
                "decisions": result.decisions,
                "virtual_s": result.virtual_s,
                "wall_s": result.wall_s,
                "kinds": [
                    {
                        "kind": row.kind,
                        "calls": row.calls,
                        "p50_us": row.p50_us,
                        "p99_us": row.p99_us,
                        "max_us": row.max_us,
                        "cpu_p50_us": row.cpu_p50_us,
                        "cpu_p99_us": row.cpu_p99_us,
                    }
                    for row in result.kinds
                ],
            }
            for result in results
        ],
    }
    return json.dumps(record, indent=2) + "\n"
