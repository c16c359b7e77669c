"""Builders for KV policy tests: small readable configs and a full request turn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvcache import KVCacheConfig, KVPolicy, PrefixMatch, Priority, TieredCache, make_kv_policy
from kvcache.policy_base import CachePolicyBase

__all__ = ["cache_of", "path_on_device", "run_turn", "spec_config", "spec_policy"]


def spec_config(**overrides: Any) -> KVCacheConfig:
    """Page of 1 token, 12 device tokens, 8 host tokens, and a link moving 1 token/s.

    With `bytes_per_token=1` and 1 B/s, moving n tokens takes exactly n seconds, so timings in
    the tests read directly from token counts.
    """
    values: dict[str, Any] = {
        "policy": "priority",
        "page_size": 1,
        "device_capacity_tokens": 12,
        "host_capacity_tokens": 8,
        "prefetch_margin_s": 0.5,
        "transfer": {
            "bytes_per_token": 1,
            "d2h_bandwidth_bytes_per_s": 1.0,
            "h2d_bandwidth_bytes_per_s": 1.0,
            "latency_s": 0.0,
        },
    }
    values.update(overrides)
    return KVCacheConfig.model_validate(values)


def spec_policy(**overrides: Any) -> KVPolicy:
    return make_kv_policy(spec_config(**overrides))


def run_turn(
    policy: KVPolicy,
    tokens: Sequence[int],
    now_s: float,
    *,
    session_id: str | None = None,
    priority: Priority = Priority.LOW,
) -> PrefixMatch:
    """One request end to end: match, load back, lock, reserve the miss, insert, unlock."""
    match = policy.match_prefix(tokens, now_s, session_id=session_id)
    if match.host_tokens:
        loaded = policy.load_back(tokens, priority, now_s)
        assert loaded.ok, loaded
    receipt = policy.lock(tokens)
    need = len(tokens) - receipt.locked_tokens
    allocation = policy.reserve(need, priority, now_s)
    assert allocation.ok, allocation
    policy.insert(tokens, now_s, reserved_tokens=need, session_id=session_id)
    policy.unlock(receipt)
    return match


def path_on_device(policy: KVPolicy, tokens: Sequence[int]) -> bool:
    """Whether every whole page of `tokens` is cached on device."""
    match = policy.peek_prefix(tokens)
    return match.device_tokens == len(tokens) - len(tokens) % policy.config.page_size


def cache_of(policy: KVPolicy) -> TieredCache:
    """The cache under a shipped policy (for invariant checks)."""
    assert isinstance(policy, CachePolicyBase)
    return policy.cache
