"""Validated settings of the agentkv SGLang plugin (`configs/kvcache/sglang_plugin.yaml`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from foundation.config import FrozenConfig, load_config

__all__ = ["AGENTKV_CONFIG_ENV", "AgentKVConfig", "load_plugin_config"]

AGENTKV_CONFIG_ENV = "AGENTKV_CONFIG"
"""The plugin runs inside SGLang's scheduler process: its config file comes by this variable
(set by `conductor serve-sglang --agentkv-config`), as SGLang's own plugins are configured."""


class AgentKVConfig(FrozenConfig):
    """How the agentkv radix cache treats sessions."""

    high_priority_min: int = Field(
        default=1,
        description="Requests of at least this priority are high (critical groups): their "
        "session's KV is pinned between turns (the rollout's AgentLoopConfig.high_priority).",
    )
    pin_budget_fraction: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Most of the device KV pool that pins may hold; beyond it a high "
        "session's turn unpins the least recently pinned other high sessions (fraction).",
    )
    pin_ttl_s: float = Field(
        default=300.0,
        gt=0.0,
        description="A pin that no turn of its session renewed for this long is released (a "
        "session whose close never arrived) (s).",
    )


def load_plugin_config(path: str | None) -> AgentKVConfig:
    """The file at `path`, or the defaults when there is none."""
    return load_config(AgentKVConfig, Path(path)) if path else AgentKVConfig()
