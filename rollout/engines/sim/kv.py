"""`KVBackend`: the KV-memory seam of the simulated engine (what it asks of a prefix-cache policy).

The engine owns time, batching and the host↔device link; the backend owns KV placement: which
token prefixes are cached on the device or the host, who holds what, and what to evict. Two
implementations are meant to fit: `LRURadixKV` (plain LRU radix cache, in this package) and the
priority-aware manager in `kvcache/` (through an adapter).

A request's life as the engine drives it (all token counts are tokens of KV, not pages):

1. `acquire(rid, ids, priority, session_id)` matches the cached prefix of `ids` and *locks* it for
   `rid` (device part and host part) so it cannot be evicted while the request lives. At most
   `len(ids) - 1` tokens match, in whole pages: the engine must compute the last token itself.
2. `load_back(rid)` makes the host part of that prefix device-resident (allocating device room);
   the engine charges the returned tokens to the H2D link and delays `rid` until they land.
3. `reserve(rid, n, priority)` allocates `n` device tokens to `rid` before a forward computes them
   (a prefill chunk, or decode tokens). A shortfall means nothing was allocated: the engine then
   waits, retracts or preempts. `available_tokens(priority)` tells ahead how much a request of that
   priority could get (free + what it may evict); `unreserve` gives back what a forward
   did not use (the engine reserves a multi-step decode block up front).
4. `commit(rid, ids, computed)` after a prefill chunk: `ids[:computed]` now have KV; whole pages
   join the shared tree (so siblings hit them), stay locked by `rid`, and duplicates of pages that
   another request committed first are freed.
5. `release(rid, ids, computed)` when the request leaves: commits `ids[:computed]` as evictable
   cache, frees everything else `rid` allocated (the partial last page, unused reservations, and
   on retraction the decode KV) and unlocks. After an abort the engine passes prompt + partial
   output, so a resubmission of that sequence hits the cache.

Between these the engine calls `before_forward(demand_tokens)` before each forward (a chance to
offload ahead of pressure), forwards session hints through `hint`, and collects background
copies (write-through, proactive offload/prefetch) with `drain_transfers`, which it charges to
the link. `stats()` reports occupancy and counters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, overload, runtime_checkable

from kvcache.page_keys import append_only_origin, extend_page_keys, page_keys
from rollout.engines.base import KVHint

__all__ = [
    "CachedPrefix",
    "JoinedTokens",
    "KVBackend",
    "KVBackendStats",
    "LoadBack",
    "NamespacedTokens",
    "PrivateHold",
    "TokenSeq",
    "Tokens",
    "Transfer",
    "TransferDirection",
    "give_back_each",
    "in_namespace",
    "namespace_salt",
]

Tokens = tuple[int, ...]


class TokenSeq(Protocol):
    """What backends get as a request's token ids: a tuple, or a view whose slices are tuples."""

    def __len__(self) -> int: ...

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Tokens: ...


class JoinedTokens:
    """`head + tail` without copying either; slices (step 1) come back as tuples.

    The engine passes prompt + output this way when a request leaves, so caching a long
    context's last turn costs the new tokens, not the whole context. Page keys
    (`kvcache.page_keys`) are the head's where it carries them, hashed only past its last
    whole page.
    """

    __slots__ = ("_head", "_keys", "_tail")

    def __init__(self, head: TokenSeq, tail: Tokens) -> None:
        self._head = head
        self._tail = tail
        self._keys: dict[int, list[int]] = {}

    def page_keys(self, page_size: int, n_pages: int) -> Sequence[int]:
        head_pages = len(self._head) // page_size
        if n_pages <= head_pages:
            return page_keys(self._head, page_size, n_pages)
        keys = self._keys.get(page_size)
        if keys is None:
            keys = list(page_keys(self._head, page_size, head_pages)[:head_pages])
            self._keys[page_size] = keys
        if len(keys) < n_pages:
            extend_page_keys(keys, self, page_size, n_pages)
        return keys

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Tokens: ...

    def __getitem__(self, index: int | slice) -> int | Tokens:
        split = len(self._head)
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("JoinedTokens slices must have step 1")
            if stop <= split:
                return self._head[start:stop]
            if start >= split:
                return self._tail[start - split : stop - split]
            return self._head[start:] + self._tail[: stop - split]
        position = index + len(self) if index < 0 else index
        if position < split:
            return self._head[position]
        return self._tail[position - split]

    def append_only_origin(self) -> tuple[list[int], int] | None:
        """The head's append-only origin (`kvcache.page_keys.append_only_origin`): the tail
        is a copy of output that no list is known to hold."""
        origin = append_only_origin(self._head)
        if origin is None:
            return None
        return origin[0], min(origin[1], len(self._head))

    def to_tuple(self) -> Tokens:
        return self._head[:] + self._tail


def namespace_salt(namespace: str) -> int:
    """The offset `NamespacedTokens` adds to every token id of `namespace` ('' → 0).

    Above 2**32 (past any vocabulary), and distinct per namespace up to a 64-bit hash collision,
    so two namespaces never share a page (every cache compares or hashes the token values).
    """
    if not namespace:
        return 0
    digest = hashlib.blake2b(namespace.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") | 1) << 32


class NamespacedTokens:
    """`base` with every id shifted by `salt`: a cache namespace as the backends see it.

    The KV backends key prefixes by token values only; shifting the values puts each
    namespace's sequences in a token space of their own, so no prefix matches across
    namespaces while lengths (and so every KV count) stay the same.
    """

    __slots__ = ("_base", "_salt")

    def __init__(self, base: TokenSeq, salt: int) -> None:
        self._base = base
        self._salt = salt

    def __len__(self) -> int:
        return len(self._base)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Tokens: ...

    def __getitem__(self, index: int | slice) -> int | Tokens:
        salt = self._salt
        if isinstance(index, slice):
            return tuple(token + salt for token in self._base[index])
        return self._base[index] + salt


def in_namespace(token_ids: TokenSeq, namespace: str) -> TokenSeq:
    """`token_ids` as the KV backends must see them in `namespace` ('' → unchanged)."""
    salt = namespace_salt(namespace)
    return NamespacedTokens(token_ids, salt) if salt else token_ids


@dataclass(frozen=True, slots=True)
class CachedPrefix:
    """The cached prefix of a sequence: `device_tokens` usable now, then `host_tokens` on host."""

    device_tokens: int
    host_tokens: int

    @property
    def cached_tokens(self) -> int:
        return self.device_tokens + self.host_tokens


@dataclass(frozen=True, slots=True)
class LoadBack:
    """Outcome of `load_back`: `tokens` to copy host→device, or a shortfall (nothing moved)."""

    tokens: int
    shortfall_tokens: int = 0


class TransferDirection(StrEnum):
    H2D = "h2d"  # host → device (load-back, prefetch)
    D2H = "d2h"  # device → host (write-through, write-back, offload)


@dataclass(frozen=True, slots=True)
class Transfer:
    """A background copy the backend made; `session_id` names who waits for an H2D prefetch."""

    direction: TransferDirection
    tokens: int
    session_id: str = ""


@dataclass(frozen=True, slots=True)
class KVBackendStats:
    """Occupancy (tokens) and cumulative counters (tokens) of a backend.

    The counters after `loaded_tokens` are None when the backend does not track them.
    """

    capacity_tokens: int
    used_tokens: int
    evictable_tokens: int
    host_capacity_tokens: int = 0
    host_used_tokens: int = 0
    dropped_tokens: int = 0  # evicted from the device with no host copy kept (lost)
    demoted_tokens: int = 0  # evicted from the device, kept on host
    offloaded_tokens: int = 0  # copied device → host
    loaded_tokens: int = 0  # copied host → device
    device_hit_tokens: int | None = None  # admitted prefixes found on the device
    host_hit_tokens: int | None = None  # admitted prefixes found on host only
    miss_tokens: int | None = None  # admitted prompt tokens not cached
    recomputed_tokens: int | None = None  # misses a session had cached before (lost KV)
    offloads: int | None = None  # device → host copies (proactive or by eviction)
    prefetches: int | None = None  # host → device copies started ahead of a session's return
    prefetches_in_time: int | None = None  # of which landed before the session's tool returned
    prefetches_late: int | None = None  # of which landed after it returned
    pins_high: int | None = None  # open sessions holding a high_ref pin on their KV
    pins_low: int | None = None  # open sessions holding a low_ref pin on their KV


class PrivateHold(Protocol):
    """A backend's record of one request's private (reserved, not yet cached) device tokens."""

    private: int


def give_back_each(spare: Sequence[tuple[str, int]], hold_of: Callable[[str], PrivateHold]) -> int:
    """Take `tokens` back from each request's private reservation (`unreserve_each`): every
    amount is checked before any changes, so a refusal changes nothing. Returns the total."""
    holds = [(hold_of(rid), rid, tokens) for rid, tokens in spare]
    for hold, rid, tokens in holds:
        if not 0 <= tokens <= hold.private:
            raise ValueError(
                f"request {rid!r} cannot give back {tokens} tokens: it holds {hold.private} "
                "private tokens; give back only what reserve() granted and no forward used"
            )
    for hold, _, tokens in holds:
        hold.private -= tokens
    return sum(tokens for _, _, tokens in holds)


@runtime_checkable
class KVBackend(Protocol):
    """A prefix-cache policy over device (HBM) and host KV, driven by the simulated engine.

    Priorities are the engine's integers (larger is more urgent). Every `rid` passed to
    `reserve`, `unreserve`, `load_back`, `commit` or `release` must have been `acquire`d and
    not yet released.
    """

    @property
    def page_tokens(self) -> int:
        """Tokens per page; prefixes are matched and cached in whole pages."""
        ...

    @property
    def capacity_tokens(self) -> int:
        """Device KV capacity."""
        ...

    def match_prefix(self, token_ids: TokenSeq) -> CachedPrefix:
        """How much of `token_ids` (at most `len - 1`, whole pages) is cached; locks nothing."""
        ...

    def acquire(
        self, rid: str, token_ids: TokenSeq, priority: int, session_id: str
    ) -> CachedPrefix:
        """Match like `match_prefix` and lock the matched prefix (both tiers) for `rid`."""
        ...

    def load_back(self, rid: str) -> LoadBack:
        """Make the host part of `rid`'s locked prefix device-resident (evicting if allowed)."""
        ...

    def available_tokens(self, priority: int) -> int:
        """Device tokens a request of `priority` could get now: free plus evictable for it."""
        ...

    def reserve(self, rid: str, tokens: int, priority: int) -> int:
        """Allocate `tokens` device tokens to `rid`; return the shortfall (0: done; >0: none)."""
        ...

    def reserve_each(self, rids: Sequence[str], tokens: int, priority: int) -> int:
        """Allocate `tokens` to each of `rids` in one go, evicting only what a request of
        `priority` may (pass the lowest of theirs); all or nothing, returns the shortfall.

        A decode block's allocation: one policy call instead of one per running request.
        """
        ...

    def unreserve_each(self, spare: Sequence[tuple[str, int]]) -> None:
        """`unreserve` for several requests at once: (rid, tokens) pairs (a decode block's end)."""
        ...

    def unreserve(self, rid: str, tokens: int) -> None:
        """Give back `tokens` of `rid`'s reservation that no forward used."""
        ...

    def commit(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        """`token_ids[:computed_tokens]` of `rid` have KV now: cache their whole pages."""
        ...

    def release(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        """`rid` leaves: cache `token_ids[:computed_tokens]`, free the rest, unlock."""
        ...

    def hint(self, hint: KVHint) -> None:
        """A session hint (open, set_priority, tool_wait, tool_done, close) from the rollout."""
        ...

    def before_forward(self, demand_tokens: int) -> None:
        """Called before each forward that will allocate about `demand_tokens` device tokens."""
        ...

    def drain_transfers(self) -> tuple[Transfer, ...]:
        """Background copies made since the last call (the engine charges them to the link)."""
        ...

    def flush(self) -> None:
        """Drop every cached prefix no live request holds (after a weight update)."""
        ...

    def stats(self) -> KVBackendStats:
        """Occupancy and counters."""
        ...
