"""Validated configuration of the stand-ins: the simulated trainer and the scripted agent."""

from __future__ import annotations

from pydantic import Field

from foundation.config import FrozenConfig

__all__ = ["ScriptedPolicyConfig", "TrainerSimConfig"]


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
    actions: tuple[str, ...] = Field(
        default=(),
        description="Fixed turn texts every sample plays instead of a drawn strategy (demos "
        "and tests that need the same observations in every run, e.g. printf and cat, not "
        "pytest's timings); the last one is repeated if the episode goes on.",
    )
