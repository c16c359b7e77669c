"""`AgentKVCache`: SGLang's `UnifiedRadixCache` with the rollout's session pins.

It changes nothing of SGLang's tree, eviction or HiCache; it adds one thing at the end of each
request: the session's pin (`kvcache.sglang_plugin.pins`), a real `TreeLock` on the node that
ends its cached context. So high-priority KV waits on the device through its tool call and is
counted as protected by SGLang's admission (`evictable_size()` stays exactly what can be
evicted), while low-priority KV stays ordinary cache that goes first under pressure (to host,
with HiCache). Session and priority come from the request (`session_id`, `priority`); `close`
and `set_priority` hints from its `kv_hints` envelope.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sglang.srt.mem_cache.base_prefix_cache import BasePrefixCache
from sglang.srt.mem_cache.registry import TreeCacheBuildContext, create_unified_radix_cache
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

from kvcache.hints import HintKind
from kvcache.sglang_plugin.config import AgentKVConfig
from kvcache.sglang_plugin.hints import session_hints
from kvcache.sglang_plugin.pins import Action, Pin, SessionPins, Unpin

__all__ = ["AgentKVCache", "build_agentkv_cache"]


class AgentKVCache(UnifiedRadixCache):
    """See the module docstring. `configure` before the first request (the factory does)."""

    def __init__(self, params: Any) -> None:
        super().__init__(params)
        self._locks: dict[str, Any] = {}  # session -> TreeLock of its pin
        self.configure(AgentKVConfig())

    def configure(self, config: AgentKVConfig) -> None:
        capacity = int(self.token_to_kv_pool_allocator.size)
        for session in list(self._locks):
            self._apply([Unpin(session)])
        self.agentkv_config = config
        self.pins = SessionPins(
            high_priority_min=config.high_priority_min,
            budget_tokens=int(config.pin_budget_fraction * capacity),
            ttl_s=config.pin_ttl_s,
        )

    @property
    def pinned_sessions(self) -> dict[str, int]:
        """Pinned sessions and their pinned tokens."""
        return self.pins.pinned

    def on_release(self, req: Any, *, checkpointed: bool) -> None:
        super().on_release(req, checkpointed=checkpointed)
        session = getattr(req, "session_id", None) or ""
        actions: list[Action] = list(self.pins.expire(time.monotonic()))
        closed = False
        for hint in session_hints(getattr(req, "kv_hints", None)):
            if hint.kind is HintKind.CLOSE:
                actions += self.pins.close(hint.session_id)
                closed = closed or hint.session_id == session
            elif hint.kind is HintKind.SET_PRIORITY:
                actions += self.pins.set_priority(hint.session_id, hint.priority)
        node = getattr(req, "last_node", None)
        if session and checkpointed and not closed and node is not None:
            priority = req.priority if isinstance(req.priority, int) else 0
            tokens = int(req.kv.cache_protected_len)
            actions += self.pins.turn_ended(session, priority, node, tokens, time.monotonic())
        self._apply(actions)

    def session_turn_ended(self, session_id: str, priority: int, node: int, tokens: int) -> None:
        """Pin decisions for a turn cached up to `node` (what `on_release` does per request)."""
        self._apply(self.pins.turn_ended(session_id, priority, node, tokens, time.monotonic()))

    def close_session(self, session_id: str) -> None:
        self._apply(self.pins.close(session_id))

    def set_session_priority(self, session_id: str, priority: int) -> None:
        self._apply(self.pins.set_priority(session_id, priority))

    def reset(self) -> None:
        # A flush drops every node: the pins' locks go with them. (SGLang's constructor calls
        # reset before ours has run: nothing is pinned yet then.)
        if hasattr(self, "_locks"):
            self._locks.clear()
            self.configure(self.agentkv_config)
        super().reset()

    def _apply(self, actions: Sequence[Action]) -> None:
        for action in actions:
            if isinstance(action, Pin):
                lock = self.lock(action.node)  # the new pin first: a shared prefix stays locked
                self.unlock(self._locks.pop(action.session_id, None))
                self._locks[action.session_id] = lock
            else:
                self.unlock(self._locks.pop(action.session_id, None))


def build_agentkv_cache(ctx: TreeCacheBuildContext, config: AgentKVConfig) -> BasePrefixCache:
    """SGLang's own construction (components, HiCache) with `AgentKVCache` as the class."""
    cache = create_unified_radix_cache(ctx, cache_class=AgentKVCache)
    assert isinstance(cache, AgentKVCache)
    cache.configure(config)
    return cache
