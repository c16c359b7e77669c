"""Configuration of the simulated engine: batching limits, SGLang scheduling knobs, host tier, link.

Loaded from `configs/engine/sim.yaml`. Defaults are SGLang's (0.5.x) unless a description says
otherwise; the model and GPU live in `ServedModelConfig` (`configs/model/*.yaml`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Self

from pydantic import Field, model_validator

from foundation.config import FrozenConfig
from kvcache.config import KVCacheConfig

__all__ = [
    "HostTierConfig",
    "HostWritePolicy",
    "KVBackendKind",
    "LinkConfig",
    "PauseMode",
    "RetractionPolicy",
    "SchedulePolicy",
    "SimEngineConfig",
]


class SchedulePolicy(StrEnum):
    """Order of the waiting queue."""

    FCFS = "fcfs"  # arrival order (SGLang `--schedule-policy fcfs`)
    PRIORITY = "priority"  # larger `priority` first, then arrival (`--enable-priority-scheduling`)


class RetractionPolicy(StrEnum):
    """Which decoding requests give back their KV first when memory runs out (sglang.md §2)."""

    LENGTH = "length"  # fewest output tokens first, ties: longest input first (SGLang default)
    PRIORITY = "priority"  # lowest priority first, then as LENGTH


PauseMode = Literal["abort", "retract", "in_place"]
"""SGLang's `/pause_generation` modes: abort everything in flight (callers get partial output),
send running requests back to the waiting queue (KV freed, recomputed later), or stop in place."""


class KVBackendKind(StrEnum):
    """Which KV backend the engine drives (`rollout.engines.sim.factory.build_kv_backend`)."""

    RADIX_LRU = "radix_lru"  # `LRURadixKV`: SGLang's own radix cache, passive LRU, HiCache host
    KVCACHE = "kvcache"  # `PolicyKV` over the `kvcache` manager (its `kvcache.policy`)


# kvcache sizes the factory derives from the model, `page_tokens`, `host` and `link`; they must
# keep their defaults in `SimEngineConfig.kvcache` (a round trip through model_dump still loads).
_DERIVED_KVCACHE_FIELDS = (
    "page_size",
    "device_capacity_tokens",
    "host_capacity_tokens",
    "transfer",
)


class HostWritePolicy(StrEnum):
    """When device KV gets a host copy (SGLang `--hicache-write-policy`, sglang.md §4)."""

    WRITE_THROUGH = "write_through"  # on insert, while the host has room (SGLang default)
    WRITE_BACK = "write_back"  # only when evicted from the device


class HostTierConfig(FrozenConfig):
    """The host-DRAM KV tier (SGLang HiCache)."""

    enabled: bool = Field(
        default=True, description="Keep evicted KV in host memory (`--enable-hierarchical-cache`)."
    )
    ratio: float = Field(
        default=2.0,
        ge=0,
        description="Host KV capacity as a multiple of the device pool (`--hicache-ratio`, "
        "default 2.0; perf-model §9.3).",
    )
    write_policy: HostWritePolicy = Field(
        default=HostWritePolicy.WRITE_THROUGH, description="When KV is copied device→host."
    )


class LinkConfig(FrozenConfig):
    """The host↔device link (PCIe Gen5 x16) that KV offloads and load-backs cross."""

    h2d_gb_per_s: float = Field(
        default=47.0,
        gt=0,
        description="Host→device GB/s (1e9 B/s) for large pinned DMA copies (perf-model §9.3, "
        "vLLM offloading blog H100 measurement).",
    )
    d2h_gb_per_s: float = Field(
        default=47.0, gt=0, description="Device→host GB/s (perf-model §9.3)."
    )
    latency_s: float = Field(
        default=15e-6,
        ge=0,
        description="Fixed seconds per transfer (perf-model §9.3, 10–20 µs [A]).",
    )


class SimEngineConfig(FrozenConfig):
    """Batching and scheduling of the simulated continuous-batching engine."""

    name: str = Field(default="sim", description="Engine name reported in `Engine.name`.")
    max_running_requests: int = Field(
        default=256,
        gt=0,
        description="Requests in the running batch at most (`--max-running-requests`; 256 = "
        "SGLang's `cuda_graph_max_bs` for TP<4, perf-model §3.6) [A].",
    )
    page_tokens: int = Field(
        default=64, gt=0, description="Tokens per KV page (`--page-size`; perf-model §9: 64)."
    )
    chunked_prefill_tokens: int = Field(
        default=8192,
        gt=0,
        description="Largest prefill chunk of one request per step (`--chunked-prefill-size`, "
        "8192 on H100/H200; perf-model §3.6).",
    )
    max_prefill_tokens: int = Field(
        default=16384,
        gt=0,
        description="Prefill tokens per step over all requests (`--max-prefill-tokens`, 16384).",
    )
    mixed_chunk: bool = Field(
        default=False,
        description="Run decodes in the same step as prefill chunks (`--enable-mixed-chunk`); "
        "off: a prefill step stalls every decoding request (SGLang default).",
    )
    schedule_policy: SchedulePolicy = Field(
        default=SchedulePolicy.FCFS, description="Order of the waiting queue."
    )
    priority_preemption: bool = Field(
        default=False,
        description="When a waiting request cannot be admitted, preempt running requests of "
        "lower priority (needs schedule_policy=priority; sglang.md §2).",
    )
    preemption_threshold: int = Field(
        default=0,
        ge=0,
        description="A waiting request preempts only requests it beats by MORE than this "
        "(`--priority-scheduling-preemption-threshold`, SGLang default 10; 0 here because the "
        "rollout layer uses small priorities).",
    )
    retraction_policy: RetractionPolicy = Field(
        default=RetractionPolicy.LENGTH, description="Retraction order when KV runs out."
    )
    retract_decode_steps: int = Field(
        default=20,
        ge=1,
        description="After a retraction, KV for this many decode steps of every remaining "
        "request must be free (SGLANG_RETRACT_DECODE_STEPS, sglang/srt/environ.py).",
    )
    init_new_token_ratio: float = Field(
        default=0.7,
        gt=0,
        le=1,
        description="Share of each running request's remaining max_new_tokens that admission "
        "keeps free for its decode (SGLANG_INIT_NEW_TOKEN_RATIO × schedule_conservativeness).",
    )
    min_new_token_ratio: float = Field(
        default=0.098,
        ge=0,
        le=1,
        description="Floor the ratio decays to (init × SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14).",
    )
    new_token_ratio_decay_steps: int = Field(
        default=600,
        gt=0,
        description="Decode steps to decay from init to min (SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS).",
    )
    clip_max_new_tokens: int = Field(
        default=4096,
        gt=0,
        description="Remaining max_new_tokens is clipped to this in the admission estimate "
        "(SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION).",
    )
    max_block_steps: int = Field(
        default=512,
        gt=0,
        description="Decode steps simulated at once while the batch cannot change (a speed "
        "knob: the block ends wherever the batch could change, so results do not depend on it).",
    )
    weight_update_s: float = Field(
        default=0.0,
        ge=0,
        description="Seconds `update_weights` takes (weight transfer into the engine) [A].",
    )
    flush_cache_on_weight_update: bool = Field(
        default=True,
        description="Drop cached KV on a weight update (SGLang `flush_cache=True` default).",
    )
    host: HostTierConfig = Field(default_factory=HostTierConfig)
    link: LinkConfig = Field(default_factory=LinkConfig)
    kv_backend: KVBackendKind = Field(
        default=KVBackendKind.RADIX_LRU,
        description="KV backend: 'radix_lru' (SGLang's own radix cache: passive LRU, the "
        "baseline) or 'kvcache' (the kvcache manager, running `kvcache.policy`: session refs "
        "by priority, tool-wait offload, prefetch). 'kvcache' needs schedule_policy: priority.",
    )
    kvcache: KVCacheConfig = Field(
        default_factory=KVCacheConfig,
        description="Policy knobs of the kvcache manager (used when kv_backend is 'kvcache'; "
        "kvcache.config.KVCacheConfig). Its page size, pool sizes and link model are "
        "derived from page_tokens, the model, host and link; do not set them here.",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.min_new_token_ratio > self.init_new_token_ratio:
            raise ValueError(
                f"min_new_token_ratio {self.min_new_token_ratio} exceeds init_new_token_ratio "
                f"{self.init_new_token_ratio}; lower the floor"
            )
        if self.priority_preemption and self.schedule_policy is not SchedulePolicy.PRIORITY:
            raise ValueError(
                "priority_preemption needs schedule_policy: priority (as in SGLang, preemption is "
                "part of priority scheduling)"
            )
        defaults = KVCacheConfig()
        derived = [
            name
            for name in _DERIVED_KVCACHE_FIELDS
            if getattr(self.kvcache, name) != getattr(defaults, name)
        ]
        if derived:
            raise ValueError(
                f"kvcache.{', kvcache.'.join(derived)} cannot be set here: the engine derives "
                "the page size, pool sizes and link model from page_tokens, the model's KV pool, "
                "host.ratio and link; set those instead"
            )
        if (
            self.kv_backend is KVBackendKind.KVCACHE
            and self.schedule_policy is not SchedulePolicy.PRIORITY
        ):
            raise ValueError(
                "kv_backend: kvcache needs schedule_policy: priority (the policy refuses low-"
                "priority requests the KV that high-priority sessions hold; in FCFS order such a "
                "refused request would block the high-priority requests queued behind it)"
            )
        if self.max_prefill_tokens < self.page_tokens:
            raise ValueError(
                f"max_prefill_tokens {self.max_prefill_tokens} is below one page "
                f"({self.page_tokens} tokens); raise it"
            )
        return self
