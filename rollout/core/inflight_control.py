"""`InflightControl`: prime-rl's adaptive cap on in-flight episodes, as a pure state machine.

The knob-free peer `adaptive_inflight` (`rollout.jobs.policies`) bounds its live samples with
this cap. Source: PrimeIntellect-ai/prime-rl on main (commit 559b447, August 2026):
`src/prime_rl/orchestrator/concurrency.py` (PR #3285 "adaptive concurrency" and PR #3307 "soft
and hard kv cap"), its dispatcher's `cancel_inflight` (youngest groups first) and its inference
metrics poller (every 5 s). Written here from that control law, constants as configuration
(`InflightControlConfig`, their prime-rl names in the field descriptions):

* **start** at device-KV capacity ÷ the longest context an episode may reach (prime-rl's
  engine `max_model_len`): the pessimistic bound, one full-length episode per pool;
* **grow** at the pipeline's own pace: each finished episode advances the turnover by
  1/in-flight and multiplies the cap by 1.25^(1/in-flight) (×1.25 per full turnover), while
  the last poll was clear (no preemption, nothing queued, device-KV use at most 0.6 on every
  engine), that poll is fresh (15 s) and the cap binds (in-flight ≥ 0.9 × cap);
* **trim** when device-KV use passes 0.8 (soft): lower the cap to in-flight × 0.7 ÷ use and let
  completions drain the pool; past 0.9 (hard), also cancel the excess now, youngest groups
  first. A trim waits 6 polls before the next;
* **cut** on overload: a preemption (the engine retracted a request for KV) cuts to 0.8 ×
  in-flight, a queue that persists (queued > 0.5 × running for 6 polls) to 0.9 ×, and either
  to 0.5 × when it recurs within 6 polls of the last drain; a cut cancels the excess and
  ignores further overload until in-flight has drained below the new cap.

The cap stays within [min_inflight, max_inflight]. Device-KV use is what vLLM's
`kv_cache_usage_perc` reports: KV held by running requests over capacity (cached KV nobody
holds counts as free). Issue 27 describes an older controller of the same PR line (June 2026:
grow while use < 0.8, the growth step tapering near that target); main replaced it with the one
above, which this follows.

Pure: polls and finished episodes in, cap changes out (`CapChange`: the new cap and how many
in-flight episodes to cancel); the asyncio gate is `rollout.runtime.inflight_limit`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from foundation.config import FrozenConfig

__all__ = ["CapChange", "EngineLoadSample", "InflightControl", "InflightControlConfig"]

Signal = Literal["clear", "soft", "hard"]
_SEVERITY: dict[Signal, int] = {"clear": 0, "soft": 1, "hard": 2}


class InflightControlConfig(FrozenConfig):
    """prime-rl's controller constants (concurrency.py on main, 559b447); see the module."""

    min_inflight: int = Field(
        default=1, ge=1, description="Smallest cap (ConcurrencyConfig.min_inflight) (episodes)."
    )
    max_inflight: int | None = Field(
        default=1024,
        ge=1,
        description="Largest cap (ConcurrencyConfig.max_inflight); None: no ceiling (episodes).",
    )
    initial_inflight: int | None = Field(
        default=None,
        ge=1,
        description="Starting cap (ConcurrencyConfig.initial_inflight); None: KV capacity ÷ "
        "the longest context an episode may reach (episodes).",
    )
    turnover_growth: float = Field(
        default=1.25,
        gt=1.0,
        description="Cap growth per pipeline turnover (TURNOVER_GROWTH) (x).",
    )
    binding_fraction: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        description="The cap binds when in-flight reaches this fraction of it (BINDING_FRACTION).",
    )
    kv_usage_grow: float = Field(
        default=0.6,
        gt=0.0,
        le=1.0,
        description="Grow only while every engine's device-KV use is at most this "
        "(KV_USAGE_GROW) (fraction).",
    )
    kv_usage_soft_cap: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description="Above this device-KV use, lower the cap and let the pool drain "
        "(KV_USAGE_SOFT_CAP) (fraction).",
    )
    kv_usage_hard_cap: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        description="Above this device-KV use, also cancel the excess, youngest groups first "
        "(KV_USAGE_HARD_CAP) (fraction).",
    )
    kv_usage_target: float = Field(
        default=0.7,
        gt=0.0,
        le=1.0,
        description="A trim resizes to in-flight × this ÷ use (KV_USAGE_TARGET) (fraction).",
    )
    kv_trim_cooldown_polls: int = Field(
        default=6, ge=0, description="Polls between KV trims (KV_TRIM_COOLDOWN_POLLS) (polls)."
    )
    queue_ratio: float = Field(
        default=0.5,
        ge=0.0,
        description="A queue overloads when queued requests exceed this fraction of running "
        "ones (QUEUE_RATIO) (fraction).",
    )
    queue_persistence_polls: int = Field(
        default=6,
        ge=1,
        description="Consecutive overloaded polls before a queue cut (QUEUE_PERSISTENCE_POLLS) "
        "(polls).",
    )
    queue_cut_fraction: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        description="A queue cut keeps this fraction of in-flight (QUEUE_CUT_FRACTION).",
    )
    preemption_cut_fraction: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description="A preemption cut keeps this fraction of in-flight (PREEMPTION_CUT_FRACTION).",
    )
    escalated_cut_fraction: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="A cut within the escalation grace keeps this fraction "
        "(ESCALATED_CUT_FRACTION).",
    )
    escalation_grace_polls: int = Field(
        default=6,
        ge=0,
        description="Polls after a drain during which a new overload cuts at the escalated "
        "fraction (ESCALATION_GRACE_POLLS) (polls).",
    )
    growth_gate_ttl_s: float = Field(
        default=15.0,
        gt=0.0,
        description="A clear poll allows growth for this long (GROWTH_GATE_TTL_S) (s).",
    )
    refill_burst_fraction: float = Field(
        default=0.1,
        gt=0.0,
        description="Admissions per poll interval at most max(group size, this × cap): the "
        "dispatcher's burst cap on refills (admission_budget: max_inflight // 10) (fraction).",
    )
    poll_interval_s: float = Field(
        default=5.0,
        gt=0.0,
        description="Seconds between engine polls (inference_metrics.POLL_INTERVAL); also the "
        "admission window of the refill burst cap (the dispatcher's admission_window_s, 5 s "
        "too) (s).",
    )

    @model_validator(mode="after")
    def _ordered(self) -> InflightControlConfig:
        if not self.kv_usage_grow <= self.kv_usage_soft_cap <= self.kv_usage_hard_cap:
            raise ValueError(
                "need kv_usage_grow <= kv_usage_soft_cap <= kv_usage_hard_cap, got "
                f"{self.kv_usage_grow}, {self.kv_usage_soft_cap}, {self.kv_usage_hard_cap}"
            )
        top = self.max_inflight
        if top is not None and self.min_inflight > top:
            raise ValueError(f"min_inflight {self.min_inflight} exceeds max_inflight {top}")
        if top is not None and self.initial_inflight is not None and self.initial_inflight > top:
            raise ValueError(f"initial_inflight {self.initial_inflight} exceeds max_inflight {top}")
        return self


@dataclass(frozen=True, slots=True)
class EngineLoadSample:
    """One engine at one poll (raw facts; the controller judges them)."""

    engine: str
    kv_usage: float  # device KV held by running requests ÷ capacity (free cache counts as free)
    running: int
    waiting: int
    preemptions: int  # cumulative KV-pressure preemptions (retractions); deltas are taken here


@dataclass(frozen=True, slots=True)
class CapChange:
    """A new cap, and how many in-flight episodes to cancel now (0: let completions drain)."""

    cap: int
    cancel: int
    kind: Literal["grow", "trim", "cut"]
    reason: str


class InflightControl:
    """The cap on in-flight episodes (see the module docstring)."""

    def __init__(
        self, config: InflightControlConfig, *, kv_capacity_tokens: int, max_context_tokens: int
    ) -> None:
        if kv_capacity_tokens <= 0 or max_context_tokens <= 0:
            raise ValueError(
                "the controller needs positive KV capacity and episode length, got "
                f"{kv_capacity_tokens} and {max_context_tokens}"
            )
        self.config = config
        start = config.initial_inflight or kv_capacity_tokens / max_context_tokens
        self._cap = self._clamp(start)  # float: growth compounds below one episode
        self.limit = int(self._cap)
        self.turnover = 0.0
        self.signal: Signal = "clear"
        self._can_grow = False
        self._can_grow_until_s = -math.inf
        self._previous: dict[str, EngineLoadSample] = {}
        self._queue_overload_polls = 0
        self._trim_cooldown = 0
        self._escalation_grace = 0
        self._draining = False  # after a cut: ignore overload until in-flight is below the cap
        self._escalated = False

    @property
    def cap(self) -> float:
        """The cap before rounding down to whole episodes (`limit`)."""
        return self._cap

    def episode_finished(self, inflight: int, *, generated: bool, now_s: float) -> CapChange | None:
        """An in-flight episode finished (not cancelled); `inflight` counts the others still
        in flight. Advances the turnover and grows the cap while the last poll allowed it;
        an episode that generated nothing (an error) grows nothing."""
        running = inflight + 1  # the finished one was in flight
        fraction = 1.0 / running
        self.turnover += fraction
        if not generated:
            return None
        if (
            self._can_grow
            and now_s < self._can_grow_until_s
            and running >= self.config.binding_fraction * self.limit
        ):
            self._cap = self._clamp(self._cap * self.config.turnover_growth**fraction)
            return self._apply(int(self._cap))
        return None

    def observe(
        self, samples: Sequence[EngineLoadSample], *, inflight: int, now_s: float
    ) -> CapChange | None:
        """One poll of every engine: classify the pressure, gate growth, trim or cut."""
        if not samples:
            return None
        config = self.config
        worst: Signal = "clear"
        preempted = False
        max_usage = 0.0
        running = queued = 0
        for sample in samples:
            previous = self._previous.get(sample.engine)
            if previous is not None and sample.preemptions > previous.preemptions:
                preempted, worst = True, "hard"
            if sample.waiting > 0 and previous is not None and previous.waiting > 0:
                worst = _worse(worst, "soft")
            max_usage = max(max_usage, sample.kv_usage)
            running += sample.running
            queued += sample.waiting
        self._previous = {sample.engine: sample for sample in samples}
        if running > 0 and queued > config.queue_ratio * running:
            self._queue_overload_polls += 1
        else:
            self._queue_overload_polls = 0
        queue_overload = self._queue_overload_polls >= config.queue_persistence_polls
        if queue_overload or max_usage > config.kv_usage_grow:
            worst = _worse(worst, "hard" if queue_overload else "soft")
        self.signal = worst
        if self._draining and inflight <= self.limit and not preempted and not queue_overload:
            self._draining = False
            self._escalation_grace = config.escalation_grace_polls
        if not self._draining and self._escalated:
            self._escalation_grace -= 1
            if self._escalation_grace <= 0:
                self._escalated = False
        self._trim_cooldown = max(0, self._trim_cooldown - 1)
        self._can_grow = worst == "clear" and queued == 0 and not self._draining
        self._can_grow_until_s = now_s + config.growth_gate_ttl_s
        if self._draining:
            return None
        if preempted or queue_overload:
            escalated = config.escalated_cut_fraction if self._escalated else None
            if queue_overload:
                self._queue_overload_polls = 0
                fraction, reason = escalated or config.queue_cut_fraction, "queue overload"
            else:
                fraction, reason = escalated or config.preemption_cut_fraction, "preemptions"
            target = int(self._clamp(inflight * fraction))
            change = self._resize_down(target, inflight, "cut", reason)
            self._draining = self._escalated = True
            return change
        if max_usage > config.kv_usage_soft_cap and inflight > 0 and self._trim_cooldown == 0:
            hard = max_usage > config.kv_usage_hard_cap
            target = int(self._clamp(inflight * config.kv_usage_target / max_usage))
            tier = "hard" if hard else "soft"
            reason = f"kv use {max_usage:.2f}: {tier} trim"
            self._trim_cooldown = config.kv_trim_cooldown_polls
            return self._resize_down(target, inflight, "trim", reason, cancel=hard)
        return None

    def _resize_down(
        self,
        target: int,
        inflight: int,
        kind: Literal["trim", "cut"],
        reason: str,
        *,
        cancel: bool = True,
    ) -> CapChange:
        """Lower the cap (never raise it) and, with `cancel`, shed the in-flight excess."""
        target = min(target, self.limit)
        self._cap = float(target)
        excess = inflight - target if cancel and inflight > target else 0
        self.limit = target
        return CapChange(target, excess, kind, reason)

    def _apply(self, limit: int) -> CapChange | None:
        """A grown cap, when it grew by a whole episode."""
        if limit == self.limit:
            return None
        self.limit = limit
        return CapChange(limit, 0, "grow", "clear engines, the cap binds")

    def _clamp(self, value: float) -> float:
        ceiling = self.config.max_inflight or math.inf
        return float(min(max(value, float(self.config.min_inflight)), ceiling))


def _worse(a: Signal, b: Signal) -> Signal:
    return a if _SEVERITY[a] >= _SEVERITY[b] else b
