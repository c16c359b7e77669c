"""The simulated inference engine: SGLang-like continuous batching on a calibrated cost model.

Build one with `build_sim_engine`, or wire `SimEngine` to your own `KVBackend` and `TokenModel`.
"""

from rollout.engines.sim.batcher import SimEngineCounters
from rollout.engines.sim.config import (
    HostTierConfig,
    HostWritePolicy,
    LinkConfig,
    RetractionPolicy,
    SchedulePolicy,
    SimEngineConfig,
)
from rollout.engines.sim.cost_model import (
    CostModelConfig,
    decode_step_time_s,
    prefill_attention_units,
    step_time_s,
)
from rollout.engines.sim.engine import SimEngine
from rollout.engines.sim.factory import build_lru_kv, build_sim_engine
from rollout.engines.sim.kv import (
    CachedPrefix,
    JoinedTokens,
    KVBackend,
    KVBackendStats,
    LoadBack,
    TokenSeq,
    Transfer,
    TransferDirection,
)
from rollout.engines.sim.lru_kv import LRURadixKV
from rollout.engines.sim.served_model import GpuConfig, ServedModelConfig
from rollout.engines.sim.token_model import TokenModel, TurnPlan

__all__ = [
    "CachedPrefix",
    "CostModelConfig",
    "GpuConfig",
    "HostTierConfig",
    "HostWritePolicy",
    "JoinedTokens",
    "KVBackend",
    "KVBackendStats",
    "LRURadixKV",
    "LinkConfig",
    "LoadBack",
    "RetractionPolicy",
    "SchedulePolicy",
    "ServedModelConfig",
    "SimEngine",
    "SimEngineConfig",
    "SimEngineCounters",
    "TokenModel",
    "TokenSeq",
    "Transfer",
    "TransferDirection",
    "TurnPlan",
    "build_lru_kv",
    "build_sim_engine",
    "decode_step_time_s",
    "prefill_attention_units",
    "step_time_s",
]
