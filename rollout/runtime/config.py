"""Validated configuration of the rollout shell: the policy flags, the agent loop, the conductor.

`rollout.core.config` holds the decision cores' sections (`configs/rollout/default.yaml`); this
module holds what the async shell reads. `PolicyConfig` is one rollout policy or baseline (its
presets are in `rollout.jobs.policies`); `rollout_config_for` applies its scheduler and admission
flags to the cores' config.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from foundation.config import FrozenConfig
from rollout.core.config import RolloutConfig
from rollout.core.recompute_control import RecomputeControlConfig

__all__ = [
    "AgentLoopConfig",
    "ConductorConfig",
    "DeadlineConfig",
    "PolicyConfig",
    "rollout_config_for",
]


class PolicyConfig(FrozenConfig):
    """How the same conductor behaves: one rollout policy or baseline (presets in policies.py)."""

    name: str = Field(min_length=1, description="Label used in tables and run directories.")
    description: str = Field(default="", description="One line for the comparison table.")
    critical_priority: bool = Field(
        default=True,
        description="Rank groups by predicted closure cost and give the critical ones (those "
        "that complete the next batch soonest) generation slots, act slots and KV first; off: "
        "every sample is low priority, first come first served.",
    )
    preemption: bool = Field(
        default=True,
        description="Abort a low-priority generation when a critical sample waits for a slot.",
    )
    low_priority_kv_watermark: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Start low-priority generations only while this fraction of device KV is "
        "free (evictable cache counts as free); 0 = no throttle (fraction).",
    )
    kv_policy: Literal["priority", "radix_lru"] = Field(
        default="priority",
        description="The engine's KV cache: 'priority' (the kvcache manager: high_ref and "
        "low_ref sessions, proactive offload) or 'radix_lru' (SGLang's own radix cache, "
        "passive LRU eviction).",
    )
    kv_hints: bool = Field(
        default=True,
        description="Send session hints (open, tool_wait, tool_done, set_priority, close) to "
        "the engine's KV manager.",
    )
    engine_priority_scheduling: bool = Field(
        default=True,
        description="Let the engine order its own waiting queue by request priority (SGLang "
        "--enable-priority-scheduling); off: FCFS inside the engine (and no engine-side "
        "priority preemption).",
    )
    admission: Literal["staleness_bound", "synchronous"] = Field(
        default="staleness_bound",
        description="staleness_bound: at step k at most (k + async_factor) × B groups admitted; "
        "synchronous: async_factor = 1 (admit B groups, wait for all, train, repeat).",
    )
    slot_holding: Literal["action", "trajectory"] = Field(
        default="action",
        description="action: a sample holds a generation slot only while it generates; "
        "trajectory: it holds an agent slot for its whole trajectory, tool time included.",
    )
    kv_residency: bool = Field(
        default=True,
        description="Start each generation only while the contexts the device KV must hold "
        "(generating samples, critical samples in tool calls) fit its pool, and preempt "
        "low-priority generations when a critical one does not fit (rollout/core/"
        "kv_residency.py).",
    )
    live_charge: Literal["current", "remaining_mean", "peak", "expected_final"] = Field(
        default="current",
        description="What the live-KV gate charges a live sample (rollout/core/context_growth.py): "
        "its context now ('current'); that plus half its predicted growth over its remaining "
        "turns, the mean over its remaining life ('remaining_mean'); or its predicted final "
        "context ('peak'). Growth and remaining turns are learned from the run. "
        "'expected_final': the final context expected of a sample live at its context now, "
        "a censored estimate from the run's finished and live samples with the unobserved tail "
        "at the context limit (rollout/core/final_context.py): no prior.",
    )
    live_kv_tier: Literal["device", "device_and_host"] = Field(
        default="device",
        description="What the live-KV gate's budget multiplies: the engines' device KV "
        "('device'), or device plus host KV ('device_and_host': a tool-waiting sample's KV is "
        "parked on host by the KV manager, so the whole tier holds the live set).",
    )
    live_bound: Literal["kv_gate", "recompute"] = Field(
        default="kv_gate",
        description="Action-level slot holding only: what bounds the live samples. 'kv_gate': "
        "the live contexts fit `live_kv_budget` x the device KV (rollout/runtime/live_gate.py); "
        "'recompute': a count that backs off when the engines recompute evicted KV and grows "
        "with completions while they do not (rollout/core/recompute_control.py).",
    )
    recompute_control: RecomputeControlConfig = Field(
        default_factory=RecomputeControlConfig,
        description="The recompute-driven bound's constants (live_bound: recompute).",
    )
    live_kv_budget: float = Field(
        default=0.0,
        ge=0.0,
        description="Action-level slot holding only: a new sample starts only while the live "
        "samples' contexts total at most this multiple of the engines' device KV capacity "
        "(oldest admitted first; rollout/runtime/live_gate.py); keeps tool-time overlap from "
        "turning into KV thrashing; 0 = no bound (x device KV).",
    )


class AgentLoopConfig(FrozenConfig):
    """One sample's episode: limits, retries and engine request settings."""

    max_new_tokens: int = Field(
        default=4096, ge=1, description="Most tokens the model may write in one turn (tokens)."
    )
    max_context_tokens: int = Field(
        default=131072,
        ge=2,
        description="The episode ends (truncated, reward 0) at this context length (tokens).",
    )
    max_turns: int = Field(
        default=200,
        ge=1,
        description="Model turns after which the loop truncates an episode the env has not "
        "ended (a safety net; envs have their own step limits) (turns).",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="Attempts per sample: an engine or infrastructure failure restarts the "
        "sample from scratch; after the last one it is kept with infra_error and not trained on.",
    )
    default_tool_wait_s: float = Field(
        default=1.0,
        gt=0.0,
        description="Expected tool time sent with the tool_wait KV hint before any tool of that "
        "kind has been timed; perf-model.md §9.4 puts the median tool call near 1 s (s).",
    )
    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    high_priority: int = Field(
        default=1,
        description="Engine request priority of critical samples (larger is more urgent; "
        "kvcache high_priority_min must not exceed it).",
    )
    low_priority: int = Field(default=0, description="Engine request priority of other samples.")
    recompute_page_tokens: int = Field(
        default=64,
        ge=1,
        description="The engine caches whole pages of this many tokens; a prefix it computed "
        "before is rounded down to pages before counting what it had to recompute (tokens).",
    )
    generate_timeout_s: float | None = Field(
        default=None,
        gt=0.0,
        description="A generate call with no answer for this long is a hung engine: it is "
        "aborted, a warning is logged and the attempt ends as an engine error (retried). In "
        "the clock the loop runs on (virtual time under `conductor simulate`); None: no limit "
        "beyond the engine client's own (s).",
    )
    tool_result_chars: int = Field(
        default=2000,
        ge=0,
        description="Characters of each tool observation kept in the turn record (the tokens "
        "are always kept in full) (characters).",
    )


class DeadlineConfig(FrozenConfig):
    """A per-step wall-clock budget (`rollout.core.deadline`); off by default (no budget)."""

    step_budget_s: float | None = Field(
        default=None,
        gt=0.0,
        description="Wall-clock budget of one rollout step, from when the trainer asks for the "
        "batch; None: no deadline (a step waits for its B groups however long it takes) (s).",
    )
    truncate_margin_s: float = Field(
        default=0.0,
        ge=0.0,
        description="How long before the deadline the stragglers of the groups closest to "
        "completion are truncated at their current turn, and generations that cannot help "
        "the step are cancelled (aborted, resumed later) (s).",
    )
    truncated_samples: Literal["train", "drop"] = Field(
        default="train",
        description="train: keep truncated samples in the batch with the reward the env gave "
        "so far; drop: leave them out of training as infra errors are (their group still "
        "completes).",
    )
    cut_tool_calls: bool = Field(
        default=True,
        description=(
            "A truncated sample in a tool call has the call cancelled (the turn keeps no "
            "observation, the reward so far); off: the call runs to its end first, so one long "
            "test run can hold the step past its deadline."
        ),
    )
    replan_interval_s: float = Field(
        default=1.0,
        gt=0.0,
        description=(
            "Once the truncation window has begun, how often the step re-plans what to "
            "truncate and cancel: samples of the chosen groups that start after the first plan "
            "(a container that came late, a retry) are cut within this long (s)."
        ),
    )
    short_batch: Literal["wait", "proceed"] = Field(
        default="wait",
        description="A step that lacks B complete groups at its deadline: wait for them, or "
        "proceed with the groups it has (at least one; the step record says short).",
    )

    @model_validator(mode="after")
    def _margin_within_budget(self) -> DeadlineConfig:
        budget = self.step_budget_s
        if budget is not None and self.truncate_margin_s >= budget:
            raise ValueError(
                f"truncate_margin_s={self.truncate_margin_s} must be below step_budget_s="
                f"{budget}: truncation would start before the step does"
            )
        return self


class ConductorConfig(FrozenConfig):
    """The conductor's own knobs (admission, scheduling and sink are in rollout.core.config)."""

    timeseries_interval_s: float = Field(
        default=1.0,
        ge=0.0,
        description="Seconds between engine-stats samples in timeseries.jsonl; 0 = none (s).",
    )
    agent_slots: int = Field(
        default=0,
        ge=0,
        description="Trajectory-level slot holding only: samples that may be live at once; "
        "0 = the engines' total max_running_requests (samples).",
    )
    seed: int = Field(default=0, description="Seed of request ids (uuid-like, reproducible).")
    decision_log: bool = Field(
        default=True,
        description="Write decisions.jsonl in the run directory: every scheduler event and "
        "decision, in order (buffered), for `conductor replay RUN_DIR`; off saves the writes.",
    )
    deadline: DeadlineConfig = Field(
        default_factory=DeadlineConfig,
        description="Per-step wall-clock deadline with truncation; off by default.",
    )
    version_isolation: Literal["flush", "namespace"] = Field(
        default="flush",
        description="How prefix-cache KV of a retired policy version is kept from a newer one: "
        "'flush' = the engines flush their cache on each weight update (today's behaviour); "
        "'namespace' = every request carries the cache namespace 'v<policy version>' (SGLang's "
        "extra_key), so prefixes are only shared within one version, and the conductor asks "
        "the engines not to flush on an update (the retired versions' entries are never hit "
        "again and, unused, are the first an LRU cache evicts).",
    )
    retired_requests: Literal["resume", "cancel"] = Field(
        default="resume",
        description="What a weight update does to samples that have tokens of the retired "
        "version: 'resume' = they continue under the new one (partial rollout, per-token "
        "versions; today's behaviour); 'cancel' = a group not yet complete that holds tokens "
        "of the retired version is re-run from scratch as a whole (its finished samples are "
        "discarded), so every trained group has one policy version across all its samples.",
    )


def rollout_config_for(policy: PolicyConfig, rollout: RolloutConfig) -> RolloutConfig:
    """`rollout` with the policy's scheduler flags and admission mode applied."""
    scheduler = rollout.scheduler.model_copy(
        update={
            "preemption": policy.preemption and policy.critical_priority,
            "kv_residency": policy.kv_residency,
            "low_priority_kv_watermark": policy.low_priority_kv_watermark,
        }
    )
    admission = rollout.admission
    if policy.admission == "synchronous":
        admission = admission.model_copy(update={"async_factor": 1})
    return rollout.model_copy(update={"scheduler": scheduler, "admission": admission})
