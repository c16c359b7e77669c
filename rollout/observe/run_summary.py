"""`RunSummary`: the headline numbers of one run, for side-by-side policy tables.

Definitions follow `rollout.observe.metrics` (which computes the full report from a run directory):
T_next of step k is the time from step k−1's batch completion (the run start for step 1) to
step k's; E_rollout = Σ(gen + act) / Σ(pre_gen + gen + pre_act + act) over the consumed
samples; busy fraction = engine-busy seconds over engine-seconds of the run; KV hit rate =
prompt tokens served from the prefix cache over prompt tokens sent. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rollout.core.types import Trajectory
from rollout.observe.engine_work import EngineWork, trajectory_work
from rollout.observe.prompt_sharing import PromptUse, prompt_key
from rollout.observe.timeseries import EngineCounters
from rollout.trajectories.batch import Batch

__all__ = [
    "BatchDigest",
    "DecisionCounts",
    "FloorGap",
    "RunSummary",
    "digest_batch",
    "summarize_run",
]


class DecisionCounts(Protocol):
    """What a summary reads of the scheduler's decisions (the dispatcher's `DispatchCounts`)."""

    @property
    def preemptions(self) -> int: ...

    @property
    def interruptions(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FloorGap:
    """Σ T_next = floor + forwards + extra work + idle (seconds over the whole run; see
    `rollout.simulation.floor_gap`, which splits a simulated run's)."""

    elapsed_s: float
    floor_s: float
    forwards_s: float
    extra_work_s: float
    idle_s: float

    @property
    def parts_of_floor(self) -> tuple[float, float, float]:
        """Forwards, extra work and idle, each as a fraction of the floor: with 1 they sum to
        the run's T_next ÷ floor."""
        if self.floor_s <= 0:
            return (0.0, 0.0, 0.0)
        return (
            self.forwards_s / self.floor_s,
            self.extra_work_s / self.floor_s,
            self.idle_s / self.floor_s,
        )


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run's headline numbers (seconds, tokens, fractions)."""

    policy: str
    t_next_s: tuple[float, ...]
    trainer_wait_s: tuple[float, ...]
    e_rollout: float | None
    busy_fraction: float | None
    kv_hit_rate: float | None
    recomputed_tokens: int
    preemptions: int
    interruptions: int
    rewards_mean: float | None
    samples: int
    infra_failures: int
    staleness_mean: float | None = None  # steps, over consumed groups
    # Set by a simulation, which knows every sample's script (SIMULATED):
    consumed_tokens_mean: float | None = None  # planned final context of consumed samples
    admitted_tokens_mean: float | None = None  # the same over every admitted group's samples
    consumed_tokens_p90: float | None = None  # the 90th percentile of those lengths
    admitted_tokens_p90: float | None = None
    consumed_reward_mean: float | None = None  # planned reward (the script's) of consumed samples
    admitted_reward_mean: float | None = None  # the same over every admitted group's samples
    floor_t_next_s: float | None = None  # rollout.simulation.lower_bound over the consumed samples
    # prompt tokens served from the host tier (loaded back) over prompt tokens sent; None when
    # the engines do not report it (`kv_hit_rate` counts both tiers)
    kv_host_hit_rate: float | None = None
    # of recomputed_tokens, the ones older weights had computed (a weight update lost them)
    recomputed_after_update_tokens: int = 0
    # requests per decode step over the run (decode tokens ÷ decode steps); None when the
    # engines do not count their steps. A decode step's weight read is paid whatever its batch,
    # so on a KV-bound engine this is how full the device pool is of decoding contexts.
    decode_batch_mean: float | None = None
    # Σ T_next against `floor_t_next_s` × steps, part by part (set by a simulation)
    floor_gap: FloorGap | None = None

    @property
    def kv_device_hit_rate(self) -> float | None:
        """Prompt tokens served from device KV over prompt tokens sent (None: tiers unknown)."""
        if self.kv_hit_rate is None or self.kv_host_hit_rate is None:
            return None
        return max(0.0, self.kv_hit_rate - self.kv_host_hit_rate)

    @property
    def length_bias(self) -> float | None:
        """Consumed ÷ admitted mean trajectory length: < 1 means the batches lean short."""
        if not self.consumed_tokens_mean or not self.admitted_tokens_mean:
            return None
        return self.consumed_tokens_mean / self.admitted_tokens_mean

    @property
    def length_bias_p90(self) -> float | None:
        """Consumed ÷ admitted 90th-percentile length: < 1 means the long tail is left out."""
        if not self.consumed_tokens_p90 or not self.admitted_tokens_p90:
            return None
        return self.consumed_tokens_p90 / self.admitted_tokens_p90

    @property
    def reward_bias(self) -> float | None:
        """Consumed − admitted mean reward: > 0 means the batches lean toward successes (a
        difference: the rates are near 0 on hard tasks, where a ratio would blow up)."""
        if self.consumed_reward_mean is None or self.admitted_reward_mean is None:
            return None
        return self.consumed_reward_mean - self.admitted_reward_mean

    @property
    def over_floor(self) -> float | None:
        """Mean T_next ÷ its floor (≥ 1; how much is not engine work of consumed samples)."""
        if not self.floor_t_next_s or not self.t_next_s:
            return None
        return self.mean_t_next_s / self.floor_t_next_s

    @property
    def mean_t_next_s(self) -> float:
        return sum(self.t_next_s) / len(self.t_next_s) if self.t_next_s else float("nan")

    @property
    def mean_trainer_wait_s(self) -> float:
        waits = self.trainer_wait_s
        return sum(waits) / len(waits) if waits else float("nan")

    @property
    def last_batch_s(self) -> float:
        """When the last batch was complete (since the run start)."""
        return sum(self.t_next_s)


@dataclass(frozen=True, slots=True)
class BatchDigest:
    """What a run summary needs of one consumed batch (not its token arrays, which a long
    simulation should not keep: 2,048 SWE-like trajectories hold about 3 GB)."""

    complete_s: float
    wait_s: float
    useful_s: float  # Σ gen + act over its samples
    waiting_s: float  # Σ pre_gen + pre_act over its samples
    rewards: tuple[float, ...]  # of its trainable samples
    samples: int
    infra_failures: int
    group_ids: tuple[str, ...] = ()
    staleness: tuple[int, ...] = ()  # per group
    work: EngineWork = field(default_factory=EngineWork)  # of its samples, each token once
    # each sample's prompt and decoded tokens, for what shared prompts spare (an identical
    # prompt is one bytes object: a group's K samples keep one copy)
    prompts: tuple[PromptUse, ...] = ()


def digest_batch(batch: Batch) -> BatchDigest:
    useful = waiting = 0.0
    for trajectory in batch.trajectories:
        phases = trajectory.phase_totals_s()
        useful += phases["gen"] + phases["act"]
        waiting += phases["pre_gen"] + phases["pre_act"]
    trajectories = batch.trajectories
    works = [trajectory_work(t) for t in trajectories]
    return BatchDigest(
        complete_s=batch.complete_s,
        wait_s=batch.wait_s,
        useful_s=useful,
        waiting_s=waiting,
        rewards=tuple(t.reward for t in trajectories if t.is_trainable and t.reward is not None),
        samples=len(trajectories),
        infra_failures=sum(1 for t in trajectories if t.infra_error is not None),
        group_ids=batch.group_ids,
        staleness=tuple(batch.staleness()),
        work=sum(works, EngineWork()),
        prompts=_prompt_uses(trajectories, works),
    )


def _prompt_uses(
    trajectories: Sequence[Trajectory], works: Sequence[EngineWork]
) -> tuple[PromptUse, ...]:
    keys: dict[bytes, bytes] = {}
    uses = []
    for trajectory, work in zip(trajectories, works, strict=True):
        key = prompt_key(trajectory)
        uses.append(PromptUse(keys.setdefault(key, key), work.decode_tokens))
    return tuple(uses)


def summarize_run(
    policy: str,
    batches: Sequence[BatchDigest],
    *,
    origin_s: float,
    elapsed_s: float,
    busy_s: float | None,
    engines: int,
    counters: Mapping[str, EngineCounters],
    dispatch: DecisionCounts,
    host_hit_tokens: int | None = None,
    decode_steps: tuple[int, int] | None = None,
) -> RunSummary:
    """Summarize consumed `batches` (`digest_batch` of each, in order); `busy_s` is summed
    over `engines` during `elapsed_s` (None: the engines reported no busy time);
    `host_hit_tokens`: prompt tokens the engines served from their host tier (None: not
    reported); `decode_steps`: the engines' (decode tokens, decode steps), summed (None: not
    reported)."""
    t_next = []
    previous_s = origin_s
    for batch in batches:
        t_next.append(batch.complete_s - previous_s)
        previous_s = batch.complete_s
    useful = sum(batch.useful_s for batch in batches)
    waiting = sum(batch.waiting_s for batch in batches)
    rewards = [reward for batch in batches for reward in batch.rewards]
    samples = sum(batch.samples for batch in batches)
    staleness = [value for batch in batches for value in batch.staleness]
    prompt = sum(c.prompt_tokens for c in counters.values())
    cached = sum(c.cached_tokens for c in counters.values())
    return RunSummary(
        policy=policy,
        t_next_s=tuple(t_next),
        trainer_wait_s=tuple(batch.wait_s for batch in batches),
        e_rollout=useful / (useful + waiting) if useful + waiting > 0 else None,
        busy_fraction=(
            busy_s / (elapsed_s * engines)
            if busy_s is not None and elapsed_s > 0 and engines
            else None
        ),
        kv_hit_rate=cached / prompt if prompt else None,
        kv_host_hit_rate=host_hit_tokens / prompt
        if prompt and host_hit_tokens is not None
        else None,
        recomputed_tokens=sum(c.recomputed_tokens for c in counters.values()),
        recomputed_after_update_tokens=sum(
            c.recomputed_after_update_tokens for c in counters.values()
        ),
        preemptions=dispatch.preemptions,
        interruptions=dispatch.interruptions,
        rewards_mean=sum(rewards) / len(rewards) if rewards else None,
        samples=samples,
        infra_failures=sum(batch.infra_failures for batch in batches),
        staleness_mean=sum(staleness) / len(staleness) if staleness else None,
        decode_batch_mean=(
            decode_steps[0] / decode_steps[1] if decode_steps and decode_steps[1] else None
        ),
    )
