"""Wire once: the one recipe every command builds and runs a rollout with.

`conductor run`, `simulate`, `bench rollout` and `examples/trainer_loop.py` differ only in the
*world* they run against (`World`: the engines, the env sessions, the prompts and their
sources) and in what they keep; the rollout itself is always assembled here, from a plan's
resolved settings (`RolloutSpec`):

    recorder -> sink -> Conductor -> health -> trainer -> outcome

* `build_conductor`: the only place a `Conductor` is constructed;
* `open_conductor`: a running conductor for a trainer loop of your own;
* `run_steps`: the stand-in trainer for N steps with the run's recorder, health metrics,
  checkpoints and callbacks, returning what a summary needs (`StepsOutcome`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.clock import Clock
from harness.events import EventBus
from rollout.core.config import RolloutConfig
from rollout.core.decision_log import DecisionLog
from rollout.core.predictors import LengthPredictor
from rollout.core.sources import SourcePrompts
from rollout.engines.base import Engine
from rollout.jobs.run_health import RunHealth
from rollout.observe.prometheus import PoolSource
from rollout.observe.recorder import RunRecorder
from rollout.observe.run_summary import BatchDigest
from rollout.runtime.conductor import Conductor
from rollout.runtime.config import AgentLoopConfig, ConductorConfig
from rollout.runtime.env_session import SessionFactory
from rollout.runtime.policy import RolloutPolicy
from rollout.standins.config import TrainerSimConfig
from rollout.standins.trainer import SimulatedTrainer
from rollout.trajectories.batch import Batch
from rollout.trajectories.sink import TrajectorySink

__all__ = [
    "RolloutSpec",
    "StepHooks",
    "StepsOutcome",
    "World",
    "build_conductor",
    "open_conductor",
    "run_steps",
]


@dataclass(frozen=True, slots=True)
class RolloutSpec:
    """The resolved settings one conductor reads (from a plan; nothing here is changed)."""

    policy: RolloutPolicy
    rollout: RolloutConfig  # the run's shape and the policy applied (the plan did it)
    agent_loop: AgentLoopConfig
    conductor: ConductorConfig


@dataclass(frozen=True, slots=True)
class World:
    """What a rollout runs against: engines, env sessions, prompts and their sources."""

    engines: Sequence[Engine]
    sessions: SessionFactory
    num_prompts: int
    sources: Sequence[SourcePrompts] = ()  # a mixed run's sources; empty: one source
    predictor: LengthPredictor | None = None  # None: the rollout config's predictor
    # each engine's busy time (None: not known, e.g. a server that serves no /metrics)
    busy_s: Callable[[], Mapping[str, float] | None] | None = None
    pool: PoolSource | None = None  # the env pool, for the live metrics (None: simulated envs)


@dataclass(slots=True)
class StepHooks:
    """What a command does around each training step (all optional)."""

    on_batch: Callable[[Batch], None] | None = None  # as the batch arrives
    on_trained: Callable[[Batch, Conductor], None] | None = None  # after its weights (checkpoint)
    on_timeseries: Callable[[Mapping[str, Any]], None] | None = None  # engine samples
    restore: Mapping[str, Any] | None = None  # a checkpoint's conductor state (resume)
    write_trajectories: bool = True  # with a recorder: trajectories.jsonl
    decisions: bool = True  # with a recorder and `conductor.decision_log`: decisions.jsonl


@dataclass(frozen=True, slots=True)
class StepsOutcome:
    """What a run of N steps leaves for its summary."""

    digests: tuple[BatchDigest, ...]
    conductor: Conductor
    elapsed_s: float  # from the conductor's start to the last step, on the run's clock
    busy_s: Mapping[str, float] | None  # each engine's busy time then (None when unknown)
    health: dict[str, object] = field(default_factory=dict)


def build_conductor(
    spec: RolloutSpec,
    world: World,
    *,
    sink: TrajectorySink | None,
    bus: EventBus,
    clock: Clock,
    on_timeseries: Callable[[Mapping[str, Any]], None] | None = None,
    decisions: DecisionLog | None = None,
) -> Conductor:
    """The conductor of `spec` over `world` (the one place a `Conductor` is made)."""
    return Conductor(
        rollout=spec.rollout,
        policy=spec.policy,
        agent_loop=spec.agent_loop,
        config=spec.conductor,
        engines=list(world.engines),
        sessions=world.sessions,
        num_prompts=world.num_prompts,
        sources=world.sources,
        sink=sink,
        predictor=world.predictor,
        bus=bus,
        clock=clock,
        on_timeseries=on_timeseries,
        decisions=decisions,
    )


@asynccontextmanager
async def open_conductor(
    spec: RolloutSpec,
    world: World,
    *,
    bus: EventBus,
    clock: Clock,
    sink: TrajectorySink | None = None,
) -> AsyncIterator[Conductor]:
    """A running conductor for a trainer loop of your own: consume `conductor.batches()`, call
    `conductor.update_weights(version)` after each step (examples/trainer_loop.py)."""
    conductor = build_conductor(spec, world, sink=sink, bus=bus, clock=clock)
    async with conductor:
        yield conductor


async def run_steps(
    spec: RolloutSpec,
    world: World,
    *,
    steps: int,
    trainer: TrainerSimConfig,
    health: RunHealth,
    bus: EventBus,
    clock: Clock,
    recorder: RunRecorder | None = None,
    hooks: StepHooks | None = None,
) -> StepsOutcome:
    """Run the stand-in trainer for `steps` steps on a conductor over `world`.

    With a `recorder` every batch, step event, engine sample, trajectory (unless
    `hooks.write_trajectories` is off) and scheduler decision is written to its run directory,
    and `health.json` at the end.
    """
    hooks = hooks or StepHooks()
    writers = recorder.trajectory_writers() if recorder and hooks.write_trajectories else ()
    sink = TrajectorySink(spec.rollout.admission.group_size, writers)
    keep_decisions = recorder is not None and hooks.decisions and spec.conductor.decision_log
    conductor = build_conductor(
        spec,
        world,
        sink=sink,
        bus=bus,
        clock=clock,
        on_timeseries=_timeseries(recorder, hooks.on_timeseries),
        decisions=recorder.decision_log() if recorder is not None and keep_decisions else None,
    )
    if hooks.restore is not None:
        conductor.load_state_dict(hooks.restore)
    health.attach(conductor, world.pool)

    def record(batch: Batch) -> None:
        health.on_batch(batch)
        if recorder is not None:
            recorder.step(batch, held_sample_s=conductor.take_held_sample_s())
        if hooks.on_batch is not None:
            hooks.on_batch(batch)

    def trained(batch: Batch) -> None:
        if hooks.on_trained is not None:
            hooks.on_trained(batch, conductor)

    async with conductor:
        stand_in = SimulatedTrainer(trainer, on_batch=record, on_trained=trained)
        digests = await stand_in.run(conductor, steps)
        elapsed_s = clock.now() - conductor.origin_s
        measured = world.busy_s() if world.busy_s is not None else None
        busy_s = dict(measured) if measured is not None else None
    run_dir: Path | None = recorder.root if recorder is not None else None
    figures = health.finish(conductor, run_dir)
    return StepsOutcome(tuple(digests), conductor, elapsed_s, busy_s, figures)


def _timeseries(
    recorder: RunRecorder | None, also: Callable[[Mapping[str, Any]], None] | None
) -> Callable[[Mapping[str, Any]], None] | None:
    """Each engine sample to the recorder and to `also` (None when neither listens)."""
    if recorder is None:
        return also
    if also is None:
        return recorder.timeseries

    def both(record: Mapping[str, Any]) -> None:
        also(record)
        recorder.timeseries(record)

    return both
