"""`AgentKVCache`: SGLang's `UnifiedRadixCache` with the rollout's session pins.

It changes nothing of SGLang's tree, eviction or HiCache; it adds two things at the end of each
request of a session:

* a **high**-priority session is pinned (`kvcache.sglang_plugin.pins`): a real `TreeLock` on
  the node that ends its cached context, so its KV waits on the device through the tool call
  and SGLang's admission counts it as protected (`evictable_size()` stays exactly what can be
  evicted);
* a **low**-priority session's exclusive KV is offloaded at once: with HiCache
  (`--enable-hierarchical-cache`), as soon as the write-through of its new node is acknowledged,
  its chain of nodes that no other branch shares is demoted to host, leaf first, so the device
  memory serves other sessions while its tool runs and the next turn loads it back. A node is
  demoted only when it is backed up, unlocked (probed with a lock that is released at once: the
  lock's delta is non-zero exactly when the node was unlocked), and a leaf once its demoted
  child is counted out; a shared prefix stays.

Session and priority come from the request (`session_id`, `priority`); `close` and
`set_priority` hints from its `kv_hints` envelope.
"""

from __future__ import annotations

import time
from collections import defaultdict
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
        self._to_offload: set[int] = set()  # low sessions' newest nodes, until backed up
        self.offloaded_tokens = 0  # demoted to host by the low-priority offload, cumulative
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
        self._apply(actions)
        if session and checkpointed and not closed and node is not None:
            priority = req.priority if isinstance(req.priority, int) else 0
            self.session_turn_ended(session, priority, node, int(req.kv.cache_protected_len))

    def session_turn_ended(self, session_id: str, priority: int, node: int, tokens: int) -> None:
        """A session's turn was cached up to `node`: pin it (high) or offload it (low)."""
        self._apply(self.pins.turn_ended(session_id, priority, node, tokens, time.monotonic()))
        if not self.pins.is_high(priority) and self.cache_controller is not None:
            self._to_offload.add(node)
            self._offload_backed_up()

    def _finish_write_through_ack(self, ack_id: int) -> None:
        super()._finish_write_through_ack(ack_id)
        if self._to_offload:
            self._offload_backed_up()

    def close_session(self, session_id: str) -> None:
        self._apply(self.pins.close(session_id))

    def set_session_priority(self, session_id: str, priority: int) -> None:
        self._apply(self.pins.set_priority(session_id, priority))

    def reset(self) -> None:
        # A flush drops every node: the pins' locks go with them. (SGLang's constructor calls
        # reset before ours has run: nothing is pinned yet then.)
        if hasattr(self, "_locks"):
            self._locks.clear()
            self._to_offload.clear()
            self.configure(self.agentkv_config)
        super().reset()

    def _offload_backed_up(self) -> None:
        """Demote the exclusive chain of every waiting node whose write-through is done."""
        writing = {node for pending in self.ongoing_write_through.values() for node in pending[2]}
        for leaf in list(self._to_offload):
            if leaf in writing:
                continue  # its copy to host is still in flight: its ack brings us back
            self._to_offload.discard(leaf)
            self._demote_exclusive_chain(leaf)

    def _demote_exclusive_chain(self, leaf: int) -> None:
        try:
            (path,) = self.tree_core.collect_path_info([leaf])
        except KeyError:
            return  # evicted or flushed meanwhile
        tracker: defaultdict[Any, int] = defaultdict(int)
        children_left = 0  # device children of the node being looked at
        for info in reversed(path):  # leaf first
            if info.num_children - children_left != 0:
                break  # another branch hangs here: a shared prefix stays on the device
            if info.full_value_len is None or not self.is_backuped(info.node_id):
                break  # not on the device, or no host copy to keep
            if not self._unlocked(info.node_id):
                break  # a running request, a pin or a transfer holds it
            self._demote(info.node_id, tracker)
            self.offloaded_tokens += info.path_end - info.path_start
            children_left = 1  # its parent's only child is now host-only

    def _unlocked(self, node_id: int) -> bool:
        """Whether no lock holds `node_id`: a lock taken on it moves tokens from evictable to
        protected exactly when it was unlocked (a locked node's whole path is locked)."""
        result = self.inc_lock_ref(node_id)
        self.dec_lock_ref(node_id, result.to_dec_params())
        return bool(result.delta)

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
