"""Validated configuration of a run's simulated parts: the trainer, the scripted SWE agent and
the simulated cluster (engines and env nodes)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from foundation.config import FrozenConfig

__all__ = ["ClusterConfig", "EnvNodeConfig", "ScriptedPolicyConfig", "TrainerSimConfig"]


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


class EnvNodeConfig(FrozenConfig):
    """One simulated env node: how many containers it starts and tool calls it runs at once."""

    start_concurrency: int = Field(
        default=0,
        ge=0,
        description="Container starts the node runs at once; more wait in arrival order. "
        "0 means no limit.",
    )
    start_s: float = Field(
        default=0.0,
        ge=0.0,
        description="Seconds a container start takes on the node, holding a start slot, "
        "before the workload's reset_s (the warm hand-out, also held); 0: warm pool (s).",
    )
    act_slots: int = Field(
        default=0,
        ge=0,
        description="Tool calls the node executes at once; more wait, critical samples first "
        "then arrival order. 0 means no limit.",
    )

    @property
    def limited(self) -> bool:
        """Whether the node makes any sample wait or adds any start time."""
        return self.start_concurrency > 0 or self.start_s > 0 or self.act_slots > 0


class ClusterConfig(FrozenConfig):
    """The simulated cluster of `conductor simulate`: engines and env nodes, one virtual clock.

    The default (one engine, no env fleet) is the single-engine run with unlimited envs.
    """

    engines: int = Field(
        default=1,
        ge=1,
        description="Simulated engines, each with its own slots and KV pool (the engine config "
        "and model apply to each); the scheduler places samples on them.",
    )
    env_nodes: int = Field(
        default=0,
        ge=0,
        description="Simulated env nodes; each sample's env goes to the node with the fewest "
        "live envs. 0: no fleet (every env starts and acts at once, no env-side queueing).",
    )
    node: EnvNodeConfig = Field(
        default_factory=EnvNodeConfig, description="Capacity of each env node."
    )

    @model_validator(mode="after")
    def _node_limits_need_nodes(self) -> Self:
        if self.env_nodes == 0 and self.node.limited:
            raise ValueError(
                "cluster.node sets env limits but cluster.env_nodes is 0 (no fleet): set "
                "cluster.env_nodes to the number of env nodes, or drop cluster.node"
            )
        return self
