"""Engine-agnostic KV-cache manager: a two-tier radix cache with priority-aware policies.

Build a policy with `make_kv_policy(KVCacheConfig(...))`; drive it as `KVPolicy` describes.
Nothing here does I/O or reads a clock: times are passed in, transfers come back as decisions.
"""

from kvcache.accounting import KVStats
from kvcache.backoff import GroupBackoff
from kvcache.cache import TieredCache
from kvcache.checks import cache_problems, check_cache
from kvcache.config import KVCacheConfig, TransferConfig
from kvcache.errors import (
    CapacityError,
    InvariantError,
    KVCacheError,
    KVPolicyRegistrationError,
    ReceiptError,
    SessionError,
    UnknownKVPolicyError,
)
from kvcache.eviction_order import (
    EvictionAction,
    EvictionClass,
    eviction_action,
    eviction_class,
    eviction_key,
    max_evictable_class,
)
from kvcache.hints import HintKind, KVSessionHints, apply_hint
from kvcache.lru_policy import LRUKVPolicy
from kvcache.policy import KVPolicy
from kvcache.priority_policy import PriorityKVPolicy
from kvcache.registry import (
    KVPolicyBuildContext,
    KVPolicyRegistry,
    default_kv_policy_registry,
    make_kv_policy,
)
from kvcache.transfer import Direction, TransferModel
from kvcache.types import (
    AllocationResult,
    InsertResult,
    KVDecision,
    LoadBackResult,
    LockedPrefix,
    LockReceipt,
    OffloadDecision,
    OffloadReason,
    PrefetchDecision,
    PrefixMatch,
    Priority,
)

__all__ = [
    "AllocationResult",
    "CapacityError",
    "Direction",
    "EvictionAction",
    "EvictionClass",
    "GroupBackoff",
    "HintKind",
    "InsertResult",
    "InvariantError",
    "KVCacheConfig",
    "KVCacheError",
    "KVDecision",
    "KVPolicy",
    "KVPolicyBuildContext",
    "KVPolicyRegistrationError",
    "KVPolicyRegistry",
    "KVSessionHints",
    "KVStats",
    "LRUKVPolicy",
    "LoadBackResult",
    "LockReceipt",
    "LockedPrefix",
    "OffloadDecision",
    "OffloadReason",
    "PrefetchDecision",
    "PrefixMatch",
    "Priority",
    "PriorityKVPolicy",
    "ReceiptError",
    "SessionError",
    "TieredCache",
    "TransferConfig",
    "TransferModel",
    "UnknownKVPolicyError",
    "apply_hint",
    "cache_problems",
    "check_cache",
    "default_kv_policy_registry",
    "eviction_action",
    "eviction_class",
    "eviction_key",
    "make_kv_policy",
    "max_evictable_class",
]
