"""Build a ready `SimEngine` (with the LRU backend unless another is given) from its configs."""

from __future__ import annotations

from rollout.engines.sim.config import SimEngineConfig
from rollout.engines.sim.engine import SimEngine
from rollout.engines.sim.kv import KVBackend
from rollout.engines.sim.lru_kv import LRURadixKV
from rollout.engines.sim.served_model import ServedModelConfig
from rollout.engines.sim.token_model import TokenModel

__all__ = ["build_lru_kv", "build_sim_engine"]


def build_lru_kv(config: SimEngineConfig, model: ServedModelConfig) -> LRURadixKV:
    """An LRU radix cache sized from the model's KV pool and the configured host tier."""
    capacity = model.kv_capacity_tokens(config.page_tokens)
    host = 0
    if config.host.enabled:
        host = int(capacity * config.host.ratio) // config.page_tokens * config.page_tokens
    return LRURadixKV(capacity, config.page_tokens, host, config.host.write_policy)


def build_sim_engine(
    config: SimEngineConfig,
    model: ServedModelConfig,
    token_model: TokenModel,
    kv: KVBackend | None = None,
) -> SimEngine:
    """A `SimEngine` over `kv`, or over `build_lru_kv(config, model)` when none is given."""
    return SimEngine(
        config, model, kv if kv is not None else build_lru_kv(config, model), token_model
    )
