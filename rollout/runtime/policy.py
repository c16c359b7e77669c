"""`RolloutPolicy`: one rollout policy or baseline as an object, the only reader of its flags.

A policy is its validated flags (`PolicyConfig`) plus the few decisions those flags make, each a
method here so no other module branches on a flag:

* `shape_rollout`: the decision cores' settings the policy fixes (preemption, KV residency, the
  low-priority KV watermark, synchronous admission);
* `engine_asks`: what the policy needs the engine itself to do (its queue order, its KV cache);
  the engine backend applies them, or says at plan time which it cannot honour
  (`rollout.engines.registry`);
* `live_limit`: what bounds the live samples (an agent slot for a whole trajectory, the live-KV
  gate, or nothing), built when the conductor knows its engines. A limit that also reads the
  engines (`PolledLiveLimit`) is polled by the conductor and may shed live groups (they run
  again from scratch) through `LiveLimitContext.shed_groups`.

`critical_priority` and `kv_hints` are the conductor's two switches. Presets and the registry of
named policies are in `rollout.jobs.policies`; a policy of your own is a subclass (override
`live_limit` to bound live samples your way) registered there or named by a dotted path.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rollout.core.config import RolloutConfig
from rollout.core.context_growth import ContextGrowth
from rollout.core.recompute_control import RecomputeControl
from rollout.engines.base import EngineStats
from rollout.engines.registry import EngineAsks
from rollout.runtime.config import PolicyConfig
from rollout.runtime.live_gate import LiveKVGate
from rollout.runtime.recompute_limit import RecomputeLimit

__all__ = ["AgentSlots", "LiveLimit", "LiveLimitContext", "PolledLiveLimit", "RolloutPolicy"]


class LiveLimit(Protocol):
    """What a sample passes before it starts and leaves when it ends (a live-sample bound)."""

    async def enter(self, sample_id: str) -> None:
        """Wait until `sample_id` may start."""
        ...

    def leave(self, sample_id: str) -> None:
        """`sample_id` ended (or gave up): its room is free."""
        ...

    def update(self, sample_id: str, context_tokens: int) -> None:
        """A live sample's context is now `context_tokens` long (after each generation)."""
        ...


@runtime_checkable
class PolledLiveLimit(LiveLimit, Protocol):
    """A live limit that reads the engines: the conductor calls `poll` every `poll_interval_s`
    (on its clock) with every engine's stats, and lets the limit shed live groups."""

    @property
    def poll_interval_s(self) -> float:
        """Seconds between polls."""
        ...

    def poll(self, engines: Mapping[str, EngineStats], now_s: float) -> None:
        """Every engine's current stats, by engine name, at `now_s`."""
        ...


class AgentSlots:
    """Trajectory-level slot holding: at most `slots` samples live, each for its whole life."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"agent slots must be at least 1, got {slots}")
        self._semaphore = asyncio.Semaphore(slots)

    async def enter(self, sample_id: str) -> None:
        await self._semaphore.acquire()

    def leave(self, sample_id: str) -> None:
        self._semaphore.release()

    def update(self, sample_id: str, context_tokens: int) -> None:
        """Slots count samples, not tokens."""


@dataclass(frozen=True, slots=True)
class LiveLimitContext:
    """What the conductor knows when it starts (its engines' slots and device KV, the run's
    shape), and what a limit may call back (the conductor fills every field)."""

    generation_slots: int  # the engines' max_running_requests, summed
    kv_capacity_tokens: int  # the engines' device KV pools, summed (tokens)
    agent_slots: int  # ConductorConfig.agent_slots (0 = generation_slots)
    max_context_tokens: int = 0  # the longest context an episode may reach (tokens)
    kv_host_capacity_tokens: int = 0  # the engines' host KV tiers, summed (tokens)
    groups_per_step: int = 1  # B
    group_size: int = 1  # K (a mixed run's sources may differ: `group_size_of`)
    now_s: Callable[[], float] | None = None  # the conductor's clock
    group_size_of: Callable[[str], int] | None = None  # a live group's size, by group id
    # restart these live groups from scratch (their samples cancelled and run again, their
    # finished samples taken back): what a `PolledLiveLimit` sheds
    shed_groups: Callable[[Sequence[str]], None] | None = None
    # the engines' cumulative recomputed tokens (prefix a sample had computed that the engine
    # no longer held, weight updates' losses left out), from the conductor's request counters
    recomputed_tokens: Callable[[], int] | None = None
    # what a sample that has not generated yet is expected to hold (the growth-aware charge,
    # `RolloutPolicy.context_growth`; None from it: the gate's own first-context estimate)
    newcomer_tokens: Callable[[], float | None] | None = None


class RolloutPolicy:
    """One rollout policy or baseline; see the module docstring."""

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.name!r})"

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def description(self) -> str:
        return self.config.description

    def with_config(self, config: PolicyConfig) -> RolloutPolicy:
        """The same kind of policy with other flags (a derived policy, a relabelled one)."""
        clone = copy.copy(self)
        clone.config = config
        return clone

    def renamed(self, name: str) -> RolloutPolicy:
        """The same policy under another label (one value of a swept knob)."""
        return self.with_config(self.config.model_copy(update={"name": name}))

    @property
    def critical_priority(self) -> bool:
        """Whether groups are ranked by closure cost (critical groups first)."""
        return self.config.critical_priority

    @property
    def kv_hints(self) -> bool:
        """Whether the engines get session KV hints (open, tool_wait, tool_done, close)."""
        return self.config.kv_hints

    def shape_rollout(self, rollout: RolloutConfig) -> RolloutConfig:
        """`rollout` with the scheduler flags and admission mode this policy fixes."""
        flags = self.config
        scheduler = rollout.scheduler.model_copy(
            update={
                "preemption": flags.preemption and flags.critical_priority,
                "kv_residency": flags.kv_residency,
                "kv_residency_live_projection": not self.charges_growth(),
                "low_priority_kv_watermark": flags.low_priority_kv_watermark,
            }
        )
        admission = rollout.admission
        if flags.admission == "synchronous":
            admission = admission.model_copy(update={"async_factor": 1})
        return rollout.model_copy(update={"scheduler": scheduler, "admission": admission})

    def engine_asks(self) -> EngineAsks:
        """What this policy needs the engine itself to do: its queue order and KV cache (the
        engine backend applies them, or warns that it cannot: `rollout.engines.registry`)."""
        flags = self.config
        return EngineAsks(
            policy=flags.name,
            priority_scheduling=flags.engine_priority_scheduling,
            priority_kv=flags.kv_policy == "priority",
        )

    def context_growth(
        self, rollout: RolloutConfig, max_context_tokens: int = 0
    ) -> ContextGrowth | None:
        """What the live limit charges each live sample, when it is not its context now."""
        rule = self.config.live_charge
        if rule == "current" or self.live_limit_kind() != "kv":
            return None
        return ContextGrowth(
            rule,
            prior_turn_tokens=rollout.scheduler.prior_turn_tokens,
            prior_turns=rollout.predictor.sibling.prior_turns,
            ceiling_tokens=max_context_tokens,
            window=rollout.predictor.sibling.prior_window,
        )

    def charges_growth(self) -> bool:
        """Whether the live-KV gate charges a live sample its growth (not today's context)."""
        return self.config.live_charge != "current" and self.live_limit_kind() == "kv"

    def live_limit_kind(self) -> str:
        """'slots' (trajectory-level), 'kv' (the live-KV gate), 'recompute' (the
        recompute-driven count) or 'none'."""
        flags = self.config
        if flags.slot_holding == "trajectory":
            return "slots"
        if flags.live_bound == "recompute":
            return "recompute"
        return "kv" if flags.live_kv_budget > 0 else "none"

    def live_limit(self, context: LiveLimitContext) -> LiveLimit | None:
        """The bound on live samples (None: every admitted sample starts at once)."""
        flags = self.config
        if flags.slot_holding == "trajectory":
            return AgentSlots(context.agent_slots or context.generation_slots)
        if flags.live_bound == "recompute":
            if context.recomputed_tokens is None:
                raise ValueError(
                    "live_bound: recompute needs the engines' recomputed tokens "
                    "(LiveLimitContext.recomputed_tokens)"
                )
            control = RecomputeControl(
                flags.recompute_control,
                generation_slots=context.agent_slots or context.generation_slots,
                group_size=context.group_size,
            )
            return RecomputeLimit(control, context.recomputed_tokens)
        if flags.live_kv_budget > 0:
            tier = context.kv_capacity_tokens
            if flags.live_kv_tier == "device_and_host":
                tier += context.kv_host_capacity_tokens
            budget = flags.live_kv_budget * tier
            # Until contexts are reported, a newcomer counts as one slot's share of the budget.
            prior = budget / max(1, context.generation_slots)
            return LiveKVGate(
                budget, prior_first_tokens=prior, newcomer_tokens=context.newcomer_tokens
            )
        return None
