"""Validated configuration of the rollout layer's decision cores (`configs/rollout/default.yaml`).

One section per component: admission, priority (critical groups), scheduler, length predictor,
tokenizer, trajectory sink and trainer interface. Each component takes its own section; the
conductor loads the whole `RolloutConfig` with `foundation.config.load_config`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from foundation.config import FrozenConfig

__all__ = [
    "AdmissionConfig",
    "AsyncFactor",
    "MlpPredictorConfig",
    "OraclePredictorConfig",
    "PredictorConfig",
    "PriorityConfig",
    "RolloutConfig",
    "SchedulerConfig",
    "SiblingPredictorConfig",
    "SinkConfig",
    "TokenizerConfig",
    "TrainerApiConfig",
]


def _on_policy_at_zero(value: int) -> int:
    """0 means on-policy as 1 does: at most B groups admitted ahead of each step."""
    return max(1, value)


AsyncFactor = Annotated[int, AfterValidator(_on_policy_at_zero)]
"""`async_factor`: k + async_factor steps' worth of groups may be admitted; 0 and 1 = on-policy."""


class AdmissionConfig(FrozenConfig):
    """The staleness bound and the prompt order."""

    groups_per_step: int = Field(
        default=8, ge=1, description="B: groups the trainer consumes per training step (groups)."
    )
    group_size: int = Field(
        default=8,
        ge=1,
        description="K: samples per group, the GRPO group size; 1 for PPO (samples).",
    )
    async_factor: AsyncFactor = Field(
        default=2,
        ge=0,
        description=(
            "Staleness bound: at training step k at most (k + async_factor) × B groups have been "
            "admitted in total, and a group admitted at step s must be consumed by step "
            "s + async_factor − 1, so it is fewer than async_factor steps off-policy. 1 means "
            "on-policy; 0 is read as 1 (on-policy, as a staleness of 0 in AReaL) (steps)."
        ),
    )
    shuffle: bool = Field(
        default=True, description="Visit the prompts in a fresh seeded order each epoch."
    )
    seed: int = Field(default=0, description="Seed of the per-epoch prompt permutation.")
    max_epochs: int = Field(
        default=0,
        ge=0,
        description="Stop admitting after this many passes over the prompts; 0 = no limit.",
    )
    consume_window: float | None = Field(
        default=None,
        ge=1.0,
        description=(
            "Enforced bias bound: each step's batch comes from the oldest "
            "ceil(consume_window × B) admitted, unconsumed groups (in admission order), so a "
            "policy that finishes short groups first cannot train on them ahead of more than "
            "(consume_window − 1) × B older ones. 1 = strict admission order (no length bias; "
            "the step waits for its oldest B groups); larger trades bias for T_next; null = "
            "any complete group (no bound) (× B)."
        ),
    )


class PriorityConfig(FrozenConfig):
    """Critical groups: how closure cost is measured and when staleness overrides it."""

    deadline_margin_steps: int = Field(
        default=0,
        ge=0,
        description=(
            "A group becomes critical regardless of its closure cost once the training step is "
            "within this many steps of its staleness deadline (admitted_step + async_factor − 1, "
            "the last step it may be consumed at); 0 = when the batch being filled is its last "
            "chance (steps)."
        ),
    )
    window_slack_groups: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Only the oldest D + this many unfinished groups may be critical (D = groups the "
            "batch still needs), the cheapest of them first: bounds how far the consumed groups "
            "lean toward cheap (short) ones, as MiniMax Forge's windowed FIFO; 0 = oldest first; "
            "null = any unfinished group (groups)."
        ),
    )
    seconds_per_turn: float = Field(
        default=3.0,
        ge=0.0,
        description=(
            "Seconds-equivalent of one remaining turn besides decoding: tool time plus queueing "
            "and prefill; perf-model.md §9.4 puts the median tool call near 1 s and p90 at "
            "2.5–11 s (s/turn)."
        ),
    )
    seconds_per_gen_token: float = Field(
        default=0.03,
        ge=0.0,
        description=(
            "Seconds-equivalent of one remaining generated token: one decode step of a loaded "
            "batch, ~20–40 ms on H200 for 8B–32B models (perf-model.md §3.3) (s/token)."
        ),
    )


class SchedulerConfig(FrozenConfig):
    """Generation-slot scheduling: throttling and preemption."""

    low_priority_kv_watermark: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description=(
            "Low-priority generations start only while the engine's free device-KV fraction is "
            "above this; high-priority work is never throttled. 0 disables the throttle (fraction)."
        ),
    )
    preemption: bool = Field(
        default=True,
        description=(
            "Abort a running low-priority generation when a high-priority sample waits and every "
            "slot is taken, or (with kv_residency) its context does not fit the device KV "
            "(off for the no-preemption ablation)."
        ),
    )
    critical_spread: bool = Field(
        default=False,
        description=(
            "Data-parallel rule (DESIGN.md §7): a critical sample not yet tied to an engine goes "
            "only to an engine whose generating critical samples are below its share, "
            "ceil(unfinished critical samples / unpaused engines), so critical groups spread over "
            "the "
            "engines instead of queueing on one; a group's siblings still prefer their group's "
            "engine while it is under its share. When no engine with a free slot is under its "
            "share, any may take it (a slot never idles while critical work waits). A no-op "
            "with one engine. Off by default: it changes multi-engine decisions, and the "
            "simulated A/B that would justify turning it on has not been run."
        ),
    )
    source_affinity: bool = Field(
        default=False,
        description=(
            "Prefix-aware placement by task source: a new sample whose group has no engine yet "
            "prefers, among the engines with a free slot it may use (after critical_spread), "
            "those that have run samples of its source (their shared system prompt is cached "
            "there), then the most free slots as before. A tie-break only: it never makes a "
            "sample wait and never reorders the queue. A no-op with one engine or without "
            "sources."
        ),
    )
    starvation_bound_s: float | None = Field(
        default=None,
        gt=0.0,
        description=(
            "A sample waiting for a generation slot longer than this is promoted one priority "
            "class (its wait clock restarts), repeatedly up to urgent; null disables promotion "
            "(seconds)."
        ),
    )
    preemption_payoff: bool = Field(
        default=True,
        description=(
            "With preemption: a waiting critical sample preempts for a slot only where the "
            "engine's measured natural wait for a free slot exceeds one step per critical "
            "generation running there (rollout/core/slot_turnover.py); off: whenever every "
            "slot is taken. Class preemptions and KV-residency preemptions are not gated. On "
            "since session 17 (simulated: 0.99x ours' T_next on the short_context B=16 cells, "
            "identical where preemption pays; docs/benchmarks.md)."
        ),
    )
    kv_residency: bool = Field(
        default=False,
        description=(
            "Start a generation only while the contexts the device KV must hold fit its pool: "
            "generating samples and critical samples in tool calls (rollout/core/kv_residency.py)."
        ),
    )
    kv_residency_shared_prefix: bool = Field(
        default=True,
        description=(
            "With kv_residency: a group's shared prompt is charged once per engine while any of "
            "its samples is resident there (the prefix cache holds it once); off: every "
            "resident sample is charged its whole context. On since session 16 (simulated, "
            "docs/benchmarks.md: 0.94-1.00x ours' T_next on every cell measured)."
        ),
    )
    kv_residency_adaptive_room: bool = Field(
        default=True,
        description=(
            "With kv_residency: the charges are held against the device pool plus an AIMD "
            "overcommit driven by the KV the engine reports free (one turn reserve more at two "
            "turns free or more, halved below one); off: against the pool alone. On since "
            "session 16 (docs/benchmarks.md)."
        ),
    )
    hold_critical_kv: bool = Field(
        default=False,
        description=(
            "With kv_residency: a critical sample keeps its device KV through its tool calls; "
            "off: every sample gives it up when its turn ends, the KV manager offloads it to "
            "host for a tool that outlasts the round trip and prefetches it before the return "
            "(simulated on swe_like/32B: 1,424 s against 1,499 s mean T_next, seeds 0-1)."
        ),
    )
    kv_residency_live_projection: bool = Field(
        default=True,
        description=(
            "With kv_residency: a new sample starts only while every live sample, projected to "
            "at least the expected final context (prior_peak_context_tokens until one finishes, "
            "then the mean final), fits device plus host KV. Set by the policy: off where its "
            "own live gate already charges growth (live_charge other than current), which "
            "measures the same from the run's contexts with censoring instead of a prior."
        ),
    )
    prior_peak_context_tokens: int = Field(
        default=32768,
        ge=0,
        description=(
            "With kv_residency: a sample's expected final context before any has finished "
            "(afterwards the measured mean); new samples start only while every live sample, "
            "projected to at least this, fits device plus host KV (tokens)."
        ),
    )
    prior_turn_tokens: int = Field(
        default=512,
        ge=0,
        description=(
            "KV reserved for the turn a generation writes, before any turn has been measured; "
            "afterwards the measured mean tokens per turn is used (tokens)."
        ),
    )


class SiblingPredictorConfig(FrozenConfig):
    """Sibling statistics: finished siblings predict the rest of a group; else a global prior."""

    min_siblings: int = Field(
        default=1,
        ge=1,
        description="Finished siblings needed before they replace the prior (samples).",
    )
    prior_window: int = Field(
        default=2048,
        ge=1,
        description="How many recently finished samples form the global prior (samples).",
    )
    prior_turns: float = Field(
        default=20.0,
        gt=0.0,
        description="Expected total turns before any sample has finished (turns).",
    )
    prior_tokens_per_turn: float = Field(
        default=200.0,
        gt=0.0,
        description=(
            "Expected generated tokens per turn before any has been observed; perf-model.md §9.4 "
            "gives a mean of ~250 for non-thinking agents (tokens/turn)."
        ),
    )
    prior_log_sigma_within: float = Field(
        default=0.5,
        gt=0.0,
        description=(
            "Spread of log total turns among the samples of one group, until enough samples "
            "have finished to estimate it (log units)."
        ),
    )
    prior_log_sigma_between: float = Field(
        default=0.7,
        gt=0.0,
        description=(
            "Spread of the groups' typical log total turns, until it can be estimated; the SWE "
            "turn counts in perf-model.md §5.2 span p10–p90 ≈ 25–105 (log units)."
        ),
    )
    min_prior_samples: int = Field(
        default=32,
        ge=2,
        description="Finished samples needed before the prior is fitted from data (samples).",
    )
    min_log_sigma: float = Field(
        default=0.05, gt=0.0, description="Floor of the fitted spreads (log units)."
    )
    min_remaining_turns: float = Field(
        default=1.0,
        gt=0.0,
        description="Floor of the prediction for a live sample (turns).",
    )


class MlpPredictorConfig(FrozenConfig):
    """A small CPU MLP trained online on finished samples; falls back to siblings until warm."""

    hidden_units: int = Field(default=32, ge=1, description="Width of each hidden layer (units).")
    hidden_layers: int = Field(default=2, ge=1, description="Number of hidden layers.")
    learning_rate: float = Field(default=3e-3, gt=0.0, description="Adam learning rate.")
    buffer_size: int = Field(
        default=8192,
        ge=1,
        description="Most recent labelled contexts kept for training (examples).",
    )
    min_examples: int = Field(
        default=128,
        ge=1,
        description="Labelled contexts needed before the MLP replaces its fallback.",
    )
    train_every: int = Field(
        default=64, ge=1, description="Train after this many new labelled contexts (examples)."
    )
    train_steps: int = Field(default=50, ge=1, description="Optimizer steps per training round.")
    batch_size: int = Field(default=64, ge=1, description="Minibatch size (examples).")
    seed: int = Field(default=0, description="Seed of weight init and minibatch sampling.")
    torch_threads: int = Field(
        default=1,
        ge=0,
        description=(
            "Intra-op threads while the MLP trains or predicts; one is fastest for a net this "
            "small (several threads were 8× slower on a loaded 2-core machine); 0 leaves torch's "
            "setting alone (threads)."
        ),
    )

    @model_validator(mode="after")
    def _can_warm_up(self) -> MlpPredictorConfig:
        if self.min_examples > self.buffer_size:
            raise ValueError(
                f"min_examples ({self.min_examples}) exceeds buffer_size ({self.buffer_size}); "
                "the MLP would never warm up: raise buffer_size or lower min_examples"
            )
        return self


class OraclePredictorConfig(FrozenConfig):
    """The truth, optionally blurred, for simulation ablations."""

    log_noise_sigma: float = Field(
        default=0.0,
        ge=0.0,
        description=(
            "σ of a multiplicative log-normal error on the true remaining work, fixed per "
            "sample; perf-model.md §7 suggests 0.5–1.0 for realistic predictors (log units)."
        ),
    )
    seed: int = Field(default=0, description="Seed of the per-sample error.")


class PredictorConfig(FrozenConfig):
    """Which remaining-length predictor ranks the groups."""

    kind: Literal["sibling", "mlp", "oracle", "constant"] = Field(
        default="sibling", description="sibling | mlp | oracle (needs a truth callback) | constant."
    )
    sibling: SiblingPredictorConfig = Field(default_factory=SiblingPredictorConfig)
    mlp: MlpPredictorConfig = Field(default_factory=MlpPredictorConfig)
    oracle: OraclePredictorConfig = Field(default_factory=OraclePredictorConfig)


class TokenizerConfig(FrozenConfig):
    """Tokenizer and chat template."""

    kind: Literal["byte"] = Field(
        default="byte", description="byte: the dependency-free byte tokenizer."
    )
    observation_role: str = Field(
        default="tool", min_length=1, description="Chat role of tool observations in the template."
    )


class SinkConfig(FrozenConfig):
    """Where finished groups go."""

    formats: tuple[Literal["jsonl", "parquet"], ...] = Field(
        default=("jsonl",), description="Writers to use; empty keeps groups in memory only."
    )
    directory: str = Field(
        default="runs/trajectories",
        min_length=1,
        description="Output directory (created if missing).",
    )
    fsync: bool = Field(
        default=True,
        description="fsync after every group so a crash keeps every group already written.",
    )
    parquet_groups_per_file: int = Field(
        default=1,
        ge=1,
        description=(
            "Groups per Parquet part file; groups wait in memory until a part is full, so a "
            "crash loses at most this many minus one (groups)."
        ),
    )


class TrainerApiConfig(FrozenConfig):
    """GRPO advantages and padded tensors."""

    advantage_eps: float = Field(
        default=1e-6,
        gt=0.0,
        description="Added to the group reward std before dividing (reward units).",
    )
    normalize_std: bool = Field(
        default=True,
        description="Divide by the group std (GRPO); false keeps r − mean only (Dr. GRPO).",
    )
    pad_token_id: int | None = Field(
        default=None, ge=0, description="Pad id for input_ids; None uses the tokenizer's pad id."
    )


class RolloutConfig(FrozenConfig):
    """Everything the rollout decision cores read."""

    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    priority: PriorityConfig = Field(default_factory=PriorityConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    predictor: PredictorConfig = Field(default_factory=PredictorConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    sink: SinkConfig = Field(default_factory=SinkConfig)
    trainer: TrainerApiConfig = Field(default_factory=TrainerApiConfig)
