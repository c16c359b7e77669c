"""Build a ready `SimEngine` and its configured KV backend (LRU or the kvcache policy)."""

from __future__ import annotations

from foundation.clock import Clock
from kvcache.config import KVCacheConfig, TransferConfig
from rollout.engines.sim.config import KVBackendKind, SimEngineConfig
from rollout.engines.sim.engine import SimEngine
from rollout.engines.sim.kv import KVBackend
from rollout.engines.sim.lru_kv import LRURadixKV
from rollout.engines.sim.policy_kv import PolicyKV
from rollout.engines.sim.served_model import ServedModelConfig
from rollout.engines.sim.token_model import TokenModel

__all__ = [
    "build_kv_backend",
    "build_lru_kv",
    "build_policy_kv",
    "build_sim_engine",
    "policy_kv_config",
]

_BYTES_PER_GB = 1e9


def _host_capacity_tokens(config: SimEngineConfig, capacity_tokens: int) -> int:
    """The host tier: `host.ratio` × the device pool in whole pages (0 when disabled)."""
    if not config.host.enabled:
        return 0
    return int(capacity_tokens * config.host.ratio) // config.page_tokens * config.page_tokens


def build_lru_kv(config: SimEngineConfig, model: ServedModelConfig) -> LRURadixKV:
    """An LRU radix cache sized from the model's KV pool and the configured host tier."""
    capacity = model.kv_capacity_tokens(config.page_tokens)
    host = _host_capacity_tokens(config, capacity)
    return LRURadixKV(capacity, config.page_tokens, host, config.host.write_policy)


def policy_kv_config(config: SimEngineConfig, model: ServedModelConfig) -> KVCacheConfig:
    """`config.kvcache` with the engine's page size, pools and link filled in.

    The policy and the engine then agree on sizes and on how long every copy takes.
    """
    capacity = model.kv_capacity_tokens(config.page_tokens)
    link = config.link
    transfer = TransferConfig(
        bytes_per_token=model.kv_bytes_per_token,
        d2h_bandwidth_bytes_per_s=link.d2h_gb_per_s * _BYTES_PER_GB,
        h2d_bandwidth_bytes_per_s=link.h2d_gb_per_s * _BYTES_PER_GB,
        latency_s=link.latency_s,
    )
    return KVCacheConfig.model_validate(
        {
            **config.kvcache.model_dump(),
            "page_size": config.page_tokens,
            "device_capacity_tokens": capacity,
            "host_capacity_tokens": _host_capacity_tokens(config, capacity),
            "transfer": transfer.model_dump(),
        }
    )


def build_policy_kv(
    config: SimEngineConfig, model: ServedModelConfig, clock: Clock | None = None
) -> PolicyKV:
    """The kvcache policy (`config.kvcache.policy`) behind the engine's KV seam."""
    return PolicyKV(policy_kv_config(config, model), clock=clock)


def build_kv_backend(config: SimEngineConfig, model: ServedModelConfig) -> KVBackend:
    """The backend `config.kv_backend` names, sized from the model."""
    if config.kv_backend is KVBackendKind.KVCACHE:
        return build_policy_kv(config, model)
    return build_lru_kv(config, model)


def build_sim_engine(
    config: SimEngineConfig,
    model: ServedModelConfig,
    token_model: TokenModel,
    kv: KVBackend | None = None,
) -> SimEngine:
    """A `SimEngine` over `kv`, or over `build_kv_backend(config, model)` when none is given."""
    return SimEngine(
        config, model, kv if kv is not None else build_kv_backend(config, model), token_model
    )
