"""`KVPolicy`: the interface an engine (simulated or SGLang) drives, whatever the policy.

A request's life against the policy, in the order the engine calls it:

1. `match_prefix(input_ids, now_s, session_id=...)`: device hits, host hits, misses.
2. `load_back(input_ids, priority, now_s)` if there were host hits (host→device copies).
3. `lock(input_ids)`: protect the device-resident prefix while the request runs.
4. `reserve(n_tokens, priority, now_s)`: room for the tokens it will compute; on failure the
   result's `shortfall_tokens` is what to preempt.
5. `insert(input_ids + output_ids, now_s, reserved_tokens=..., session_id=...)`: cache the KV,
   then `unlock(receipt)`. Return any reservation not handed to `insert` with `release`.

Between requests: session hints (`kvcache.hints.KVSessionHints`) and, before every forward step,
`before_forward(predicted_demand_tokens, now_s)`. Every method is synchronous and pure of I/O
and clocks; transfers are returned as decisions for the engine to carry out.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kvcache.accounting import KVStats
from kvcache.config import KVCacheConfig
from kvcache.hints import KVSessionHints
from kvcache.page_keys import TokenSequence
from kvcache.transfer import TransferModel
from kvcache.types import (
    AllocationResult,
    InsertResult,
    KVDecision,
    LoadBackResult,
    LockedPrefix,
    LockReceipt,
    PrefixMatch,
    Priority,
)

__all__ = ["KVPolicy"]


@runtime_checkable
class KVPolicy(KVSessionHints, Protocol):
    """A KV-cache policy over a two-tier radix cache. Sizes are tokens; times are seconds."""

    @property
    def name(self) -> str:
        """The registry name of the policy."""
        ...

    @property
    def config(self) -> KVCacheConfig: ...

    @property
    def transfer(self) -> TransferModel:
        """The link model the policy decides with; the engine should simulate copies with it."""
        ...

    @property
    def device_used_tokens(self) -> int:
        """Cached plus reserved device tokens."""
        ...

    @property
    def free_device_tokens(self) -> int: ...

    @property
    def host_used_tokens(self) -> int: ...

    def match_prefix(
        self, token_ids: TokenSequence, now_s: float, *, session_id: str | None = None
    ) -> PrefixMatch:
        """Look up a request's prompt: counts toward hit rates and refreshes LRU times."""
        ...

    def count_lookup(
        self, match: PrefixMatch, now_s: float, *, session_id: str | None = None
    ) -> PrefixMatch:
        """Count a lookup made by `lock_prefix` (which counts nothing) toward hit rates, once
        the request is admitted; fills in `recomputed_tokens`."""
        ...

    def peek_prefix(self, token_ids: TokenSequence) -> PrefixMatch:
        """Like `match_prefix` without side effects (for planning)."""
        ...

    def lock(self, token_ids: TokenSequence) -> LockReceipt:
        """Protect the device-resident prefix of `token_ids` until `unlock`."""
        ...

    def lock_prefix(
        self, token_ids: TokenSequence, *, session_id: str | None = None
    ) -> LockedPrefix:
        """`peek_prefix` and `lock` from one walk of the tree (admission's lookup and lock).

        With the `session_id` whose turn this is, the walk may start where that session's
        last cached context ends (when `token_ids` continues it), not at the root."""
        ...

    def unlock(self, receipt: LockReceipt) -> None:
        """Release a lock; raises `ReceiptError` on a second release."""
        ...

    def load_back(
        self,
        token_ids: TokenSequence,
        requester_priority: Priority,
        now_s: float,
        *,
        relock: LockReceipt | None = None,
    ) -> LoadBackResult:
        """Copy the host part of the cached prefix to device, evicting what the requester may.

        With `relock` (a lock on the device part of this prefix, as `lock_prefix` gives), the
        lookup starts under it and, once loaded, the lock moves onto the whole prefix; the new
        receipt is in `LoadBackResult.receipt`.
        """
        ...

    def reserve(
        self, n_tokens: int, requester_priority: Priority, now_s: float
    ) -> AllocationResult:
        """Reserve device room, evicting leaf-up what the requester may; all or nothing."""
        ...

    def release(self, n_tokens: int, now_s: float) -> None:
        """Return reserved tokens that will not be cached (abort, unaligned tail)."""
        ...

    def insert(
        self,
        token_ids: TokenSequence,
        now_s: float,
        *,
        reserved_tokens: int = 0,
        session_id: str | None = None,
        relock: LockReceipt | None = None,
    ) -> InsertResult:
        """Cache the KV of `token_ids`; with `session_id`, it becomes the session's context.

        With `relock`, that lock moves onto the inserted tokens (it is released and the new
        receipt comes back in `InsertResult.receipt`): how a running request keeps its KV
        locked as its chunks are cached.
        """
        ...

    def evictable_size(self, requester_priority: Priority) -> int:
        """Device tokens a request of this priority can have evicted (admission budget)."""
        ...

    def before_forward(self, predicted_demand_tokens: int, now_s: float) -> tuple[KVDecision, ...]:
        """Proactive management before a forward step: prefetches and pressure offloads."""
        ...

    def stats(self) -> KVStats:
        """Accounting snapshot."""
        ...
