"""`LRUKVPolicy`: the baseline. Plain LRU eviction, optional HiCache-style demote to host.

No session references, no priorities, no proactive transfers: hints are validated and tracked
(so accounting such as recomputed tokens is comparable) but never move KV. With
`lru_demote_to_host`, an evicted node is copied to host when the host has room, discarding the
least recently used host KV if needed (SGLang HiCache `write_back`).
"""

from __future__ import annotations

from kvcache.cache import TierRules
from kvcache.config import KVCacheConfig
from kvcache.eviction_order import EvictionClass
from kvcache.policy_base import CachePolicyBase
from kvcache.sessions import SessionPhase
from kvcache.types import KVDecision, Priority

__all__ = ["LRUKVPolicy"]


class LRUKVPolicy(CachePolicyBase):
    """Least-recently-used eviction over the same two-tier radix cache."""

    name = "lru"

    def __init__(self, config: KVCacheConfig) -> None:
        rules = TierRules(
            offload_min_class=EvictionClass.UNREFERENCED if config.lru_demote_to_host else None,
            strict_host_reclaim=False,
        )
        super().__init__(config, rules)

    def _max_class(self, requester_priority: Priority) -> EvictionClass:
        # Nothing is ever referenced, so every unlocked node is in the lowest class; the
        # requester's priority does not matter.
        return EvictionClass.HIGH_REF

    def open(self, session_id: str, priority: Priority, now_s: float) -> tuple[KVDecision, ...]:
        self._sessions.open(session_id, priority)
        return ()

    def set_priority(
        self, session_id: str, priority: Priority, now_s: float
    ) -> tuple[KVDecision, ...]:
        self._sessions.get(session_id).priority = priority
        return ()

    def tool_wait(
        self, session_id: str, expected_s: float | None, now_s: float
    ) -> tuple[KVDecision, ...]:
        state = self._sessions.get(session_id)
        state.phase = SessionPhase.TOOL_WAIT
        state.tool_started_s = now_s
        state.tool_return_s = None if expected_s is None else now_s + expected_s
        return ()

    def tool_done(self, session_id: str, now_s: float) -> tuple[KVDecision, ...]:
        state = self._sessions.get(session_id)
        state.phase = SessionPhase.ACTIVE
        state.tool_started_s = state.tool_return_s = None
        return ()

    def close(self, session_id: str, now_s: float) -> tuple[KVDecision, ...]:
        self._sessions.close(session_id)
        return ()

    def before_forward(self, predicted_demand_tokens: int, now_s: float) -> tuple[KVDecision, ...]:
        self._record(now_s)
        return ()
