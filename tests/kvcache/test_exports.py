"""The public surface of `kvcache` is explicit and pinned."""

from __future__ import annotations

import importlib
import pkgutil

import kvcache

PUBLIC = {
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
}


def test_package_root_exports_exactly_the_public_api() -> None:
    assert set(kvcache.__all__) == PUBLIC


def test_every_export_resolves() -> None:
    for name in kvcache.__all__:
        assert getattr(kvcache, name) is not None


def test_every_module_declares_all() -> None:
    for module_info in pkgutil.iter_modules(kvcache.__path__):
        module = importlib.import_module(f"kvcache.{module_info.name}")
        assert isinstance(getattr(module, "__all__", None), list), module_info.name
