"""`KVCacheConfig`: every tunable of the KV-cache manager, validated (YAML: configs/kvcache/)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from foundation.config import FrozenConfig

__all__ = ["KVCacheConfig", "TransferConfig"]


class TransferConfig(FrozenConfig):
    """The host↔device link, as both the policy and the engine see it (perf-model.md §4, §9.3)."""

    bytes_per_token: int = Field(
        default=147_456,
        gt=0,
        description="KV bytes per token over all layers (bytes). Default: Qwen3-8B, BF16 KV "
        "(2 × 36 layers × 8 KV heads × 128 dims × 2 B).",
    )
    d2h_bandwidth_bytes_per_s: float = Field(
        default=47e9,
        gt=0,
        description="Device→host copy bandwidth (bytes/s). Pinned DMA over PCIe Gen5 x16.",
    )
    h2d_bandwidth_bytes_per_s: float = Field(
        default=47e9,
        gt=0,
        description="Host→device copy bandwidth (bytes/s). Pinned DMA over PCIe Gen5 x16.",
    )
    latency_s: float = Field(
        default=15e-6,
        ge=0,
        description="Fixed cost per transfer (s), paid once per offload/prefetch/load-back.",
    )


class KVCacheConfig(FrozenConfig):
    """Configuration of a KV policy (`make_kv_policy(config)`)."""

    policy: str = Field(
        default="priority",
        min_length=1,
        description="Registered policy name: 'priority' (ours) or 'lru' (baseline).",
    )
    page_size: int = Field(
        default=64,
        ge=1,
        description="Tokens per KV page (tokens). Only whole pages are cached; SGLang recommends "
        "64 with HiCache.",
    )
    device_capacity_tokens: int = Field(
        default=770_000,
        ge=1,
        description="Device (HBM) KV pool size (tokens). Default: Qwen3-8B on one H200.",
    )
    host_capacity_tokens: int = Field(
        default=1_540_000,
        ge=0,
        description="Host (DRAM) KV pool size (tokens); 0 disables the host tier. Default: "
        "2× the device pool (SGLang --hicache-ratio 2).",
    )
    high_priority_min: int = Field(
        default=1,
        description="Engine priority (larger is more urgent) at or above which a session or "
        "request counts as high priority.",
    )
    offload_unreferenced: bool = Field(
        default=False,
        description="Priority policy: also offload unreferenced nodes to host on eviction "
        "(False: drop them, keeping the host for session KV).",
    )
    reclaim_host_backups: bool = Field(
        default=False,
        description="Priority policy: when the host is full, a session's evicted or offloaded "
        "KV may take the room of host copies of device-resident KV (backups, any class: "
        "discarding one loses nothing) instead of being dropped; off: only strictly less "
        "protected host KV makes room.",
    )
    lru_demote_to_host: bool = Field(
        default=True,
        description="LRU baseline: copy evicted nodes to host when it has room (HiCache "
        "write-back); False uses the device tier only.",
    )
    tool_wait_offload: bool = Field(
        default=True,
        description="Priority policy: offload a low-priority session's exclusive KV when its "
        "tool starts (ablation switch).",
    )
    tool_wait_offload_high: bool = Field(
        default=False,
        description="Priority policy: offload a high-priority session's KV too when its tool "
        "is predicted to outlast the round trip (it is prefetched before the return); off: "
        "critical sessions keep their KV on device through every tool call.",
    )
    prefetch_margin_s: float = Field(
        default=0.05,
        ge=0,
        description="Slack (s): prefetch starts this long before (predicted tool return − "
        "reload time), and an offload must save at least this much beyond its round trip.",
    )
    prefetch_evicts_unreferenced: bool = Field(
        default=True,
        description="A prefetch may evict unreferenced cache to make room (False: it waits for "
        "free device space).",
    )
    backoff_initial_group: int = Field(
        default=1,
        ge=1,
        description="Sessions offloaded in the first step of memory pressure (sessions).",
    )
    backoff_max_group: int = Field(
        default=64,
        ge=1,
        description="Cap on the pressure-offload group, which doubles per pressured step "
        "(sessions).",
    )
    pressure_lookahead_steps: int = Field(
        default=8,
        ge=1,
        description="Forward steps of KV demand the caller sums into `before_forward`'s "
        "`predicted_demand_tokens` (steps).",
    )
    occupancy_sample_interval_s: float = Field(
        default=1.0,
        gt=0,
        description="Minimum spacing of recorded device-occupancy samples (s).",
    )
    transfer: TransferConfig = Field(
        default_factory=TransferConfig, description="Host↔device link model."
    )

    @model_validator(mode="after")
    def _check_sizes(self) -> Self:
        if self.device_capacity_tokens < self.page_size:
            raise ValueError(
                f"device_capacity_tokens={self.device_capacity_tokens} is smaller than one page "
                f"(page_size={self.page_size}); raise the capacity or lower the page size"
            )
        if self.backoff_max_group < self.backoff_initial_group:
            raise ValueError(
                f"backoff_max_group={self.backoff_max_group} is below backoff_initial_group="
                f"{self.backoff_initial_group}; set the cap at least as large as the first group"
            )
        return self
