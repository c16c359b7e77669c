"""`CachePolicyBase`: the request path (match, lock, load-back, reserve, insert) of all policies.

Subclasses choose the eviction rules and requester limits and implement the session hints and
`before_forward`; the tree, the tiers and the accounting live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvcache.accounting import KVAccounting, KVStats, OccupancyTracker
from kvcache.cache import CacheMatch, TieredCache, TierRules
from kvcache.config import KVCacheConfig
from kvcache.eviction_order import EvictionClass
from kvcache.page_keys import TokenSequence
from kvcache.sessions import SessionState, SessionTable
from kvcache.transfer import Direction, TransferModel
from kvcache.tree import PathStep, TreeNode
from kvcache.types import (
    AllocationResult,
    InsertResult,
    LoadBackResult,
    LockedPrefix,
    LockReceipt,
    PrefixMatch,
    Priority,
)

__all__ = ["CachePolicyBase"]


class CachePolicyBase:
    """Shared request path over a `TieredCache`. Not a policy by itself."""

    name: str = "base"

    def __init__(self, config: KVCacheConfig, rules: TierRules) -> None:
        self._config = config
        self._transfer = TransferModel.from_config(config.transfer)
        self._accounting = KVAccounting(OccupancyTracker(config.occupancy_sample_interval_s))
        self._cache = TieredCache(
            page_size=config.page_size,
            device_capacity_tokens=config.device_capacity_tokens,
            host_capacity_tokens=config.host_capacity_tokens,
            rules=rules,
            accounting=self._accounting,
        )
        self._sessions = SessionTable()

    # ----------------------------------------------------------------- policy-specific
    def _max_class(self, requester_priority: Priority) -> EvictionClass:
        """Highest eviction class a requester of this priority may evict."""
        raise NotImplementedError

    def _on_session_context(self, state: SessionState, leaf: TreeNode) -> None:
        """A session's latest context now ends at `leaf` (hook for reference keeping)."""

    def _after_eviction(self, now_s: float) -> None:
        """Eviction may have moved session KV to host (hook for scheduling prefetches)."""

    # ----------------------------------------------------------------- properties
    @property
    def config(self) -> KVCacheConfig:
        return self._config

    @property
    def transfer(self) -> TransferModel:
        return self._transfer

    @property
    def cache(self) -> TieredCache:
        """The underlying cache, for inspection and invariant checks (do not mutate)."""
        return self._cache

    @property
    def device_used_tokens(self) -> int:
        return self._cache.device_cached_tokens + self._cache.reserved_tokens

    @property
    def free_device_tokens(self) -> int:
        return self._cache.free_device_tokens

    @property
    def host_used_tokens(self) -> int:
        return self._cache.host_cached_tokens

    # ----------------------------------------------------------------- request path
    def match_prefix(
        self, token_ids: TokenSequence, now_s: float, *, session_id: str | None = None
    ) -> PrefixMatch:
        match = self._match(token_ids)
        self._cache.touch(match.steps, now_s)
        return self.count_lookup(
            PrefixMatch(
                query_tokens=len(token_ids),
                device_tokens=match.device_tokens,
                host_tokens=match.host_tokens,
                miss_tokens=len(token_ids) - match.device_tokens - match.host_tokens,
                device_ready_at_s=match.device_ready_at_s,
            ),
            now_s,
            session_id=session_id,
        )

    def count_lookup(
        self, match: PrefixMatch, now_s: float, *, session_id: str | None = None
    ) -> PrefixMatch:
        """Count a lookup made earlier (by `lock_prefix`) in the hit rates, once the request it
        served is admitted; returns it with `recomputed_tokens` filled in."""
        cached = match.device_tokens + match.host_tokens
        recomputed = 0
        if session_id is not None:
            state = self._sessions.get(session_id)
            seen = self._cache.tree.aligned_length(min(match.query_tokens, state.context_tokens))
            recomputed = max(0, seen - cached)
        accounting = self._accounting
        accounting.lookups += 1
        accounting.device_hit_tokens += match.device_tokens
        accounting.host_hit_tokens += match.host_tokens
        accounting.miss_tokens += match.miss_tokens
        accounting.recomputed_tokens += recomputed
        self._record(now_s)
        return replace(match, recomputed_tokens=recomputed)

    def peek_prefix(self, token_ids: TokenSequence) -> PrefixMatch:
        tokens = token_ids
        match = self._match(tokens)
        return PrefixMatch(
            query_tokens=len(tokens),
            device_tokens=match.device_tokens,
            host_tokens=match.host_tokens,
            miss_tokens=len(tokens) - match.device_tokens - match.host_tokens,
            device_ready_at_s=match.device_ready_at_s,
        )

    def lock(self, token_ids: TokenSequence) -> LockReceipt:
        return self._cache.lock_steps(self._walk(token_ids))

    def lock_prefix(
        self, token_ids: TokenSequence, *, session_id: str | None = None
    ) -> LockedPrefix:
        cache = self._cache
        tree = cache.tree
        end = tree.aligned_length(len(token_ids))
        keys = tree.page_keys(token_ids, end)
        start = self._continued_context(keys, end, session_id)
        first_page = 0 if start is None else start.end // tree.page_size
        steps = tree.walk_keys(keys, end // tree.page_size, start, first_page)
        below = cache.match_steps(steps)
        anchor = start  # the deepest device-resident node at or above the start
        while anchor is not None and not anchor.on_device:
            anchor = anchor.parent
        receipt, ready = cache.lock_path(steps, below=anchor)
        device = below.device_tokens + (0 if anchor is None else anchor.end)
        host = below.host_tokens + (
            0 if start is None or anchor is None else start.end - anchor.end
        )
        return LockedPrefix(
            PrefixMatch(
                query_tokens=len(token_ids),
                device_tokens=device,
                host_tokens=host,
                miss_tokens=len(token_ids) - device - host,
                device_ready_at_s=ready,
            ),
            receipt,
        )

    def _continued_context(
        self, keys: Sequence[int], end: int, session_id: str | None
    ) -> TreeNode | None:
        """The node where `session_id`'s last cached context ends, if the page `keys` of
        `tokens[:end]` continue it (one key compare checks the whole prefix): a lookup may
        start there instead of at the root. None otherwise."""
        if session_id is None:
            return None
        leaf = self._cache.session_leaf(session_id)
        if leaf is None or leaf.parent is None or leaf.end > end:
            return None
        if keys[leaf.end // self._cache.tree.page_size - 1] != leaf.last_page_key:
            return None
        return leaf

    def unlock(self, receipt: LockReceipt) -> None:
        self._cache.unlock(receipt)

    def load_back(
        self,
        token_ids: TokenSequence,
        requester_priority: Priority,
        now_s: float,
        *,
        relock: LockReceipt | None = None,
    ) -> LoadBackResult:
        tokens_in = token_ids
        chain = self._cache.host_chain(
            tokens_in, end=self._cache.tree.aligned_length(len(tokens_in)), below=relock
        )
        tokens = sum(node.tokens for node in chain)
        transfer_s = self._transfer.seconds(tokens, Direction.H2D)
        outcome = self._cache.load_chain(
            chain, self._max_class(requester_priority), now_s, now_s + transfer_s
        )
        self._after_eviction(now_s)
        self._record(now_s)
        if not outcome.ok:
            return LoadBackResult(
                ok=False,
                loaded_tokens=0,
                shortfall_tokens=outcome.shortfall_tokens,
                eviction=outcome.eviction,
            )
        if outcome.loaded_tokens:
            self._accounting.load_backs += 1
            self._accounting.loaded_back_tokens += outcome.loaded_tokens
        receipt = relock
        if relock is not None and chain:
            receipt = self._cache.move_lock(relock, chain[-1])
        return LoadBackResult(
            ok=True,
            loaded_tokens=outcome.loaded_tokens,
            transfer_s=transfer_s,
            ready_at_s=now_s + transfer_s,
            eviction=outcome.eviction,
            receipt=receipt,
        )

    def reserve(
        self, n_tokens: int, requester_priority: Priority, now_s: float
    ) -> AllocationResult:
        result = self._cache.reserve(n_tokens, self._max_class(requester_priority))
        self._after_eviction(now_s)
        self._record(now_s)
        if not result.offloaded_tokens:
            return result
        return AllocationResult(
            ok=result.ok,
            requested_tokens=result.requested_tokens,
            freed_tokens=result.freed_tokens,
            shortfall_tokens=result.shortfall_tokens,
            offloaded_tokens=result.offloaded_tokens,
            dropped_tokens=result.dropped_tokens,
            demoted_tokens=result.demoted_tokens,
            transfer_s=self._transfer.seconds(result.offloaded_tokens, Direction.D2H),
        )

    def release(self, n_tokens: int, now_s: float) -> None:
        self._cache.release(n_tokens)
        self._record(now_s)

    def insert(
        self,
        token_ids: TokenSequence,
        now_s: float,
        *,
        reserved_tokens: int = 0,
        session_id: str | None = None,
        relock: LockReceipt | None = None,
    ) -> InsertResult:
        tokens = token_ids
        state = self._sessions.get(session_id) if session_id is not None else None
        result, leaf = self._cache.insert(
            tokens,
            now_s,
            reserved_tokens,
            end=self._cache.tree.aligned_length(len(tokens)),
            below=relock,
        )
        if relock is not None:
            result = replace(result, receipt=self._cache.move_lock(relock, leaf))
        if state is not None:
            state.context_tokens = len(tokens)
            self._on_session_context(state, leaf)
        self._record(now_s)
        return result

    def evictable_size(self, requester_priority: Priority) -> int:
        return self._cache.evictable_tokens(self._max_class(requester_priority))

    def stats(self) -> KVStats:
        return self._accounting.snapshot(
            policy=self.name,
            bytes_per_token=self._transfer.bytes_per_token,
            device_capacity_tokens=self._cache.device_capacity_tokens,
            host_capacity_tokens=self._cache.host_capacity_tokens,
            device_used_tokens=self.device_used_tokens,
            host_used_tokens=self.host_used_tokens,
            reserved_tokens=self._cache.reserved_tokens,
        )

    def _walk(self, tokens: TokenSequence) -> list[PathStep]:
        """Walk the whole pages of `tokens` (without copying them)."""
        tree = self._cache.tree
        return tree.walk(tokens, tree.aligned_length(len(tokens)))

    def _match(self, tokens: TokenSequence) -> CacheMatch:
        return self._cache.match_steps(self._walk(tokens))

    def _record(self, now_s: float) -> None:
        self._accounting.occupancy.record(now_s, self.device_used_tokens)
