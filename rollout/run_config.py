"""Validated configuration of the rollout shell: policies, agent loop, conductor, runs.

`rollout.config` holds the decision cores' sections; this module holds what the async shell
reads (`AgentLoopConfig`, `ConductorConfig`, `TrainerSimConfig`), the rollout *policy* flags
(`PolicyConfig`; presets in `rollout.policies`), the scripted SWE agent, and the two top-level
files: `SimulateConfig` (`configs/simulate/*.yaml`) and `RunConfig` (`configs/run/default.yaml`).
Shared files (model, engine, workload, …) are referenced with a `ConfigRef`: a path, relative
to the file that names it, plus `key=value` overrides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field

from harness.config import FrozenConfig, load_config
from rollout.config import RolloutConfig

__all__ = [
    "AgentLoopConfig",
    "ConductorConfig",
    "ConfigRef",
    "PolicyConfig",
    "RunConfig",
    "ScriptedPolicyConfig",
    "SimulateConfig",
    "TrainerSimConfig",
    "shape_rollout",
]

_ConfigT = TypeVar("_ConfigT", bound=FrozenConfig)


class ConfigRef(FrozenConfig):
    """Another config file, with `key=value` overrides applied on top of it."""

    path: str = Field(
        min_length=1,
        description="YAML file; a relative path is relative to the file that names it.",
    )
    overrides: tuple[str, ...] = Field(
        default=(), description="Dotted key=value overrides, e.g. 'max_running_requests=64'."
    )

    def resolve(self, base_dir: Path) -> Path:
        """The file's path, with a relative `path` taken from `base_dir`."""
        path = Path(self.path)
        return path if path.is_absolute() else base_dir / path

    def load(self, model: type[_ConfigT], base_dir: Path) -> _ConfigT:
        """Load the file as `model` and apply the overrides."""
        return load_config(model, self.resolve(base_dir), self.overrides)


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
    kv_policy: Literal["priority", "lru"] = Field(
        default="priority",
        description="KV cache policy of the simulated engine: 'priority' (kvcache/, high_ref "
        "and low_ref sessions, proactive offload) or 'lru' (passive LRU eviction).",
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
    live_kv_budget: float = Field(
        default=0.0,
        ge=0.0,
        description="Action-level slot holding only: a new sample starts only while the live "
        "samples' contexts total at most this multiple of the engines' device KV capacity "
        "(oldest admitted first; rollout/live_gate.py); keeps tool-time overlap from turning "
        "into KV thrashing; 0 = no bound (x device KV).",
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
    tool_result_chars: int = Field(
        default=2000,
        ge=0,
        description="Characters of each tool observation kept in the turn record (the tokens "
        "are always kept in full) (characters).",
    )


class ConductorConfig(FrozenConfig):
    """The conductor's own knobs (admission, scheduling and sink sections are in rollout.config)."""

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


class TrainerSimConfig(FrozenConfig):
    """The simulated trainer: how long a step takes."""

    train_time_s: float = Field(
        default=30.0,
        ge=0.0,
        description="Seconds one optimizer step takes on the consumed batch (forward, backward, "
        "update); the weight transfer itself is the engine's weight_update_s (s).",
    )


class ScriptedPolicyConfig(FrozenConfig):
    """The scripted SWE agent that plays the model in `conductor run`."""

    fix_probability: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Chance that a sample applies the task's gold patch (reward 1 expected).",
    )
    wrong_edit_probability: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Of the samples that do not fix: chance of a wrong edit (else no edit).",
    )
    max_explore_steps: int = Field(
        default=3, ge=0, description="Most exploration calls (ls, grep, view) before editing."
    )
    min_logprob: float = Field(
        default=-2.0, lt=0.0, description="Lowest behaviour logprob the script reports."
    )
    seed: int = Field(default=0, description="Seed of each sample's strategy and logprobs.")


class SimulateConfig(FrozenConfig):
    """`conductor simulate`: N training steps in virtual time for each policy, same workload."""

    seed: int = Field(default=0, description="Seed of the workload and every policy's run.")
    steps: int = Field(default=3, ge=1, description="Training steps per policy (steps).")
    policies: tuple[str, ...] = Field(
        default=("conductor", "sync", "traj_async"),
        min_length=1,
        description="Policies to compare (rollout.policies); the first is 'ours' in ratios.",
    )
    groups_per_step: int = Field(default=4, ge=1, description="B: groups per training step.")
    group_size: int = Field(default=4, ge=1, description="K: samples per group.")
    async_factor: int = Field(
        default=2, ge=1, description="Staleness bound of the staleness_bound policies (steps)."
    )
    workload: ConfigRef = Field(description="Synthetic workload (configs/workload/*.yaml).")
    model: ConfigRef = Field(description="Served model and cost model (configs/model/*.yaml).")
    engine: ConfigRef = Field(description="Simulated engine (configs/engine/sim.yaml).")
    rollout: ConfigRef = Field(description="Rollout cores (configs/rollout/default.yaml).")
    agent_loop: AgentLoopConfig = Field(default_factory=AgentLoopConfig)
    conductor: ConductorConfig = Field(default_factory=ConductorConfig)
    trainer: TrainerSimConfig = Field(default_factory=TrainerSimConfig)
    write_trajectories: bool = Field(
        default=True,
        description="Write trajectories.jsonl (full token arrays: JSON costs about as much CPU as "
        "the simulation itself on large runs; metrics and the report do not need it).",
    )
    garbage_collection: Literal["end_of_run", "per_step", "automatic"] = Field(
        default="end_of_run",
        description="When Python's cycle collector runs during a simulated run. 'end_of_run': "
        "once, after it (acyclic garbage is freed at once anyway, and the simulator makes few "
        "cycles: peak memory of a 2,048-sample swe_like run is the same with no collection); "
        "'per_step': also after each training step (bounds cyclic garbage on long runs; each "
        "pass walks the live heap, about 0.7 s at that size); 'automatic': Python's default "
        "(its passes cost about 8% of such a run's CPU).",
    )
    out_dir: str = Field(
        default="runs/simulate",
        min_length=1,
        description="Parent of the per-policy run directories (relative to the working dir).",
    )


class RunConfig(FrozenConfig):
    """`conductor run`: scripted SWE agents on the simulated engine in wall-clock time."""

    seed: int = Field(default=0, description="Seed of the prompt order and the scripted agent.")
    steps: int = Field(default=3, ge=1, description="Training steps to run (steps).")
    policy: str = Field(default="conductor", description="Rollout policy (rollout.policies).")
    groups_per_step: int = Field(default=2, ge=1, description="B: groups per training step.")
    group_size: int = Field(default=4, ge=1, description="K: samples per group.")
    async_factor: int = Field(default=2, ge=1, description="Staleness bound (steps).")
    task_ids: tuple[str, ...] = Field(
        default=(), description="Shipped SWE tasks to use, by instance id; empty = all of them."
    )
    system_prompt: str = Field(
        default="You are a software engineer fixing an issue in a repository.",
        description="System message before each task's prompt.",
    )
    model: ConfigRef = Field(description="Served model and cost model (configs/model/*.yaml).")
    engine: ConfigRef = Field(description="Simulated engine (configs/engine/sim.yaml).")
    rollout: ConfigRef = Field(description="Rollout cores (configs/rollout/default.yaml).")
    pool: ConfigRef = Field(description="Env pool and sandbox backend (configs/pool/*.yaml).")
    swe: ConfigRef = Field(description="SWE env (configs/swe/default.yaml).")
    agent_loop: AgentLoopConfig = Field(default_factory=AgentLoopConfig)
    conductor: ConductorConfig = Field(default_factory=ConductorConfig)
    trainer: TrainerSimConfig = Field(default_factory=TrainerSimConfig)
    scripted: ScriptedPolicyConfig = Field(default_factory=ScriptedPolicyConfig)
    out_dir: str = Field(
        default="runs", min_length=1, description="Parent of the run directory (working dir)."
    )


def shape_rollout(
    rollout: RolloutConfig, *, groups_per_step: int, group_size: int, async_factor: int, seed: int
) -> RolloutConfig:
    """`rollout` with a run's batch shape (B, K), staleness bound and seed in its admission."""
    admission = rollout.admission.model_copy(
        update={
            "groups_per_batch": groups_per_step,
            "group_size": group_size,
            "async_factor": async_factor,
            "seed": seed,
        }
    )
    return rollout.model_copy(update={"admission": admission})
