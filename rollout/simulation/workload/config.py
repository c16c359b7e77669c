"""Configuration of the synthetic agentic workload (`configs/workload/*.yaml`).

Distributions follow shared/reference/perf-model.md §5 and §9.4: heavy-tailed (log-normal or
log-t) turn counts, per-turn output and observation lengths, and a mixture of tool kinds.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from foundation.config import FrozenConfig

__all__ = ["DriftConfig", "LengthSpec", "ToolKindConfig", "WorkloadConfig"]


class LengthSpec(FrozenConfig):
    """A positive, heavy-tailed quantity: `median × exp(sigma × Z)`, clipped to [min, max].

    Z is standard normal (log-normal), or Student-t with `tail_df` degrees of freedom (log-t,
    the fit TIE reports for LLM output lengths; perf-model §5.5). Units are the caller's.
    """

    median: float = Field(gt=0, description="Median value (tokens, turns or seconds).")
    sigma: float = Field(ge=0, description="Spread of the natural log of the value.")
    tail_df: float | None = Field(
        default=None,
        gt=0,
        description="Student-t degrees of freedom on the log scale; None: normal.",
    )
    min: float = Field(default=0.0, ge=0, description="Smallest value drawn (same unit).")
    max: float = Field(gt=0, description="Largest value drawn (same unit); a cap or a timeout.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.min <= self.median <= self.max:
            raise ValueError(
                f"need min <= median <= max, got {self.min}, {self.median}, {self.max}"
            )
        return self


class ToolKindConfig(FrozenConfig):
    """One kind of tool call in the mixture (perf-model §5.1, §9.4)."""

    name: str = Field(description="Tool kind, e.g. 'file_op', 'shell', 'test_run'.")
    weight: float = Field(gt=0, description="Relative frequency among tool calls.")
    latency_s: LengthSpec = Field(
        description="Seconds the call takes (the clip max is its timeout)."
    )


class DriftConfig(FrozenConfig):
    """Trajectories that lengthen as training goes on (the drift workload).

    RL runs grow their trajectories over training: reasoning models write longer answers as
    they learn (DeepSeek-R1-Zero's mean response length grew several-fold over its RL run),
    and SWE agents take more turns as they learn to test and retry (issue 27: 2-3x over
    about 20 steps) [A on the rate]. The model: a group's *training step* is its workload group
    index divided by B (the run's groups_per_step; index g is the g-th group the run opens,
    so under every policy the same groups drift alike), and each factor rises linearly from
    1 at step 0 to its final value at `over_steps`, then stays:
    `factor(step) = 1 + (final - 1) * min(1, step / over_steps)`. The turn count and each
    turn's output are the drawn values times their factor (still clipped at their `max`);
    observations (tool output) and tool latencies do not drift. A fixed knob tuned on the
    first steps' short trajectories does not fit the last steps' long ones.
    """

    over_steps: int = Field(
        gt=0, description="Training steps over which each factor rises to its final value (steps)."
    )
    turns: float = Field(
        default=1.0, gt=0, description="Factor on the turn count from `over_steps` on (x)."
    )
    output_tokens: float = Field(
        default=1.0,
        gt=0,
        description="Factor on each turn's output tokens from `over_steps` on (x).",
    )

    def factors(self, step: int) -> tuple[float, float]:
        """The (turns, output_tokens) factors of a group drawn at training `step` (>= 0)."""
        progress = min(1.0, max(0, step) / self.over_steps)
        return (
            1.0 + (self.turns - 1.0) * progress,
            1.0 + (self.output_tokens - 1.0) * progress,
        )


class WorkloadConfig(FrozenConfig):
    """A family of multi-turn agent trajectories, drawn per GRPO group and sample."""

    name: str = Field(description="Workload label; also prefixes session ids.")
    num_groups: int = Field(gt=0, description="Groups (prompts) in a benchmark batch.")
    group_size: int = Field(
        default=8,
        gt=0,
        description="Samples per group (GRPO K; 1 for PPO). A run sets it from its own "
        "group_size; only the python -m benchmarks read this default.",
    )
    vocab_size: int = Field(
        gt=1, description="Token ids are drawn from [0, vocab_size) (Qwen3: 151,936)."
    )
    eos_token_id: int = Field(
        ge=0, description="Id that ends a turn when a request names no stop token (Qwen3 151645)."
    )
    max_new_tokens: int = Field(gt=0, description="Per-turn generation cap the rollout requests.")
    max_context_tokens: int = Field(
        gt=0, description="A trajectory ends (truncated, reward 0) before its context passes this."
    )
    prompt_tokens: LengthSpec = Field(
        description="Initial prompt (system + issue + tool specs), shared by a group's samples."
    )
    turns: LengthSpec = Field(description="Model turns per trajectory (the last one submits).")
    output_tokens: LengthSpec = Field(description="Tokens the model writes per turn.")
    observation_tokens: LengthSpec = Field(description="Tool-output tokens appended per turn.")
    tools: tuple[ToolKindConfig, ...] = Field(min_length=1, description="Mixture of tool kinds.")
    reset_s: LengthSpec = Field(description="Seconds an env reset takes (warm container).")
    final_eval_s: LengthSpec = Field(description="Seconds the final test run (reward) takes.")
    sibling_correlation: float = Field(
        ge=0,
        le=1,
        description="Correlation of a sample's turn count and verbosity with its siblings' "
        "(Seer: same-prompt requests have similar lengths; perf-model §5.5) [A].",
    )
    sample_variance_share: float = Field(
        ge=0,
        le=1,
        description="Share of the log-variance of per-turn output length that is a per-sample "
        "verbosity (the rest varies turn to turn) [A].",
    )
    success_rate: float = Field(
        ge=0, le=1, description="Mean reward (resolve rate; perf-model §5.2: 0.14–0.44)."
    )
    success_concentration: float = Field(
        gt=0,
        description="Beta concentration of a group's success probability around success_rate; "
        "small values make all-pass/all-fail groups common [A].",
    )
    corpus_tokens: int = Field(
        gt=0, description="Size of the pre-drawn token pool that content is sliced from."
    )
    distinct_token_ids: int = Field(
        gt=0,
        description="Distinct ids the pool uses (fewer keep the simulator cache-friendly; pages "
        "of 64 such ids are still unique per sample).",
    )
    groups_per_step: int = Field(
        default=1,
        gt=0,
        description="Groups per training step (B). A run sets it from its own groups_per_step "
        "(a mixed run's sources each count their own groups against it); only `drift` reads "
        "it: a group's training step is its index // B.",
    )
    drift: DriftConfig | None = Field(
        default=None,
        description="Trajectories that lengthen over training steps (DriftConfig); None: every "
        "group is drawn from the same distributions.",
    )
    trace: str | None = Field(
        default=None,
        description="A trace file (JSONL or Parquet; format in "
        "rollout/simulation/workload/trace.py and docs/benchmarks.md) whose per-sample "
        "scripts are replayed instead of drawn from the distributions above (their fields "
        "then only name the workload); a relative path is from the working directory. "
        "`conductor trace convert RUN_DIR` makes one from a run.",
    )

    @model_validator(mode="after")
    def _drift_needs_drawn_scripts(self) -> Self:
        if self.drift is not None and self.trace is not None:
            raise ValueError(
                "drift lengthens drawn scripts; a replayed trace is what it is: drop one of "
                "`drift` and `trace`"
            )
        return self
