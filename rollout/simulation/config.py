"""Validated configuration of a simulated cluster: its engines and env nodes."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from foundation.config import FrozenConfig

__all__ = ["ClusterConfig", "EnvNodeConfig"]


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
