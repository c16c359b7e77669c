"""`LRURadixKV`: a plain LRU radix prefix cache over device and host KV (the baseline backend).

Behaves like SGLang's radix cache with HiCache: whole pages are cached in a radix tree keyed by
token ids; a request locks its path while it runs; eviction takes unlocked device leaves in
least-recently-used order, leaf-up, and stops as soon as enough is free. An evicted node keeps
its KV on host when the host has (or can make) room, else it is dropped. Session hints are
counted and otherwise ignored: this is the passive policy the project compares against.

Invariants: device residency is prefix-closed (a device node's parent is on device); every node
holds KV on at least one tier; a node's `lock_ref` counts the live requests whose path passes it.
Recency is a logical tick (no clock), so the cache is deterministic.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence

from rollout.engines.base import KVHint
from rollout.engines.sim.config import HostWritePolicy
from rollout.engines.sim.kv import (
    CachedPrefix,
    KVBackendStats,
    LoadBack,
    TokenSeq,
    Transfer,
    TransferDirection,
    give_back_each,
)
from rollout.engines.sim.radix import PageRadixNode, PageRadixTree

__all__ = ["LRURadixKV"]

# Requests whose last acquire was given back unused, remembered to resume their next match.
_RESUME_ENTRIES = 4096
# Rebuild a candidate heap when stale entries outnumber nodes this many times over.
_HEAP_SLACK_FACTOR = 2
_HEAP_SLACK_MIN = 1024


class _Hold:
    """What a request holds: its locked path (ending at `node`, `pos` tokens deep), private KV."""

    __slots__ = ("node", "pos", "priority", "private")

    def __init__(self, node: PageRadixNode, pos: int, priority: int) -> None:
        self.node = node
        self.pos = pos
        self.priority = priority
        self.private = 0


_HeapEntry = tuple[int, int, PageRadixNode]


class LRURadixKV:
    """A `KVBackend` with LRU eviction and an optional host tier.

    Args:
        capacity_tokens: device KV pool (whole pages).
        page_tokens: tokens per page.
        host_capacity_tokens: host KV pool; 0 disables the host tier.
        write_policy: when device KV is copied to host.
    """

    def __init__(
        self,
        capacity_tokens: int,
        page_tokens: int,
        host_capacity_tokens: int = 0,
        write_policy: HostWritePolicy = HostWritePolicy.WRITE_THROUGH,
    ) -> None:
        if page_tokens <= 0 or capacity_tokens < page_tokens:
            raise ValueError(
                f"need page_tokens > 0 and capacity_tokens >= page_tokens, got "
                f"page_tokens={page_tokens}, capacity_tokens={capacity_tokens}"
            )
        if host_capacity_tokens < 0:
            raise ValueError(f"host_capacity_tokens must be >= 0, got {host_capacity_tokens}")
        self._page = page_tokens
        self._capacity = capacity_tokens
        self._host_capacity = host_capacity_tokens
        self._write_through = write_policy is HostWritePolicy.WRITE_THROUGH
        self._tick = 0
        self._tree = PageRadixTree(page_tokens)
        self._root = self._tree.root
        self._root.device = True
        self._holds: dict[str, _Hold] = {}
        self._resume: dict[str, tuple[TokenSeq, PageRadixNode]] = {}
        self._tree_device = 0
        self._locked_device = 0
        self._private = 0
        self._host_used = 0
        self._device_heap: list[_HeapEntry] = []
        self._host_heap: list[_HeapEntry] = []
        self._pending_d2h = 0
        self._dropped = 0
        self._demoted = 0
        self._offloaded = 0
        self._loaded = 0
        self.hints_seen: Counter[str] = Counter()

    # ---- queries --------------------------------------------------------------------------

    @property
    def page_tokens(self) -> int:
        return self._page

    @property
    def capacity_tokens(self) -> int:
        return self._capacity

    def _used(self) -> int:
        return self._tree_device + self._private

    def available_tokens(self, priority: int) -> int:
        return self._capacity - self._used() + self._tree_device - self._locked_device

    def match_prefix(self, token_ids: TokenSeq) -> CachedPrefix:
        _, _, path = self._tree.walk(token_ids, self._root, 0, self._match_limit(token_ids))
        device, host, _ = self._split_tiers(path)
        return CachedPrefix(device, host)

    def stats(self) -> KVBackendStats:
        return KVBackendStats(
            capacity_tokens=self._capacity,
            used_tokens=self._used(),
            evictable_tokens=self._tree_device - self._locked_device,
            host_capacity_tokens=self._host_capacity,
            host_used_tokens=self._host_used,
            dropped_tokens=self._dropped,
            demoted_tokens=self._demoted,
            offloaded_tokens=self._offloaded,
            loaded_tokens=self._loaded,
        )

    # ---- a request's life -----------------------------------------------------------------

    def acquire(
        self, rid: str, token_ids: TokenSeq, priority: int, session_id: str
    ) -> CachedPrefix:
        if rid in self._holds:
            raise ValueError(f"request {rid!r} already holds KV; release it before acquiring again")
        start, pos = self._root, 0
        resume = self._resume.pop(rid, None)
        if resume is not None and resume[0] is token_ids:
            # Same sequence as this request's last attempt: the path down to that attempt's
            # deepest node (or its nearest live ancestor) still matches; walk on from there.
            start = resume[1]
            while not start.alive:
                start = self._tree.parent(start)
            pos = self._tree.end_of(start)
        last, _, _ = self._tree.walk(token_ids, start, pos, self._match_limit(token_ids))
        path = self._tree.path_to(last)
        device, host, usable = self._split_tiers(path)
        path = path[:usable]
        last = path[-1] if path else self._root
        self._tick += 1
        for node in path:
            node.stamp = self._tick
        self._lock(last, self._root)
        self._holds[rid] = _Hold(last, device + host, priority)
        return CachedPrefix(device, host)

    def load_back(self, rid: str) -> LoadBack:
        hold = self._hold(rid)
        host_path: list[PageRadixNode] = []
        node = hold.node
        while node is not self._root and not node.device:
            host_path.append(node)
            node = self._tree.parent(node)
        tokens = sum(n.size for n in host_path)
        if tokens == 0:
            return LoadBack(0)
        short = self._make_device_room(tokens)
        if short:
            return LoadBack(0, short)
        for node in reversed(host_path):
            self._set_device(node, True)
            self._locked_device += node.size
        self._loaded += tokens
        return LoadBack(tokens)

    def reserve(self, rid: str, tokens: int, priority: int) -> int:
        return self.reserve_each((rid,), tokens, priority)

    def reserve_each(self, rids: Sequence[str], tokens: int, priority: int) -> int:
        holds = [self._hold(rid) for rid in rids]
        if tokens <= 0 or not holds:
            return 0
        short = self._make_device_room(tokens * len(holds))
        if short:
            return short
        for hold in holds:
            hold.private += tokens
        self._private += tokens * len(holds)
        return 0

    def unreserve_each(self, spare: Sequence[tuple[str, int]]) -> None:
        self._private -= give_back_each(spare, self._hold)

    def unreserve(self, rid: str, tokens: int) -> None:
        self.unreserve_each(((rid, tokens),))

    def commit(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        hold = self._hold(rid)
        target = min(computed_tokens, len(token_ids)) // self._page * self._page
        if target <= hold.pos:
            return
        start = hold.node
        node, pos, path = self._tree.walk(token_ids, start, hold.pos, target)
        for existing in path:
            size = existing.size
            moved = min(size, hold.private)
            hold.private -= moved
            self._private -= moved
            if not existing.device:  # our fresh copy makes a host-only page device-resident
                self._set_device(existing, True)
        if pos < target:
            new = self._tree.add_child(node, token_ids, pos, target, self._tick)
            size = target - pos
            moved = min(size, hold.private)
            hold.private -= moved
            self._private -= moved
            self._set_device(new, True)
            if self._write_through:
                self._copy_to_host(new)
            node = new
        self._lock(node, start)
        hold.node, hold.pos = node, target

    def release(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        self.commit(rid, token_ids, computed_tokens)
        hold = self._holds.pop(rid)
        if computed_tokens <= 0:  # not admitted after all: it will likely try again
            self._resume[rid] = (token_ids, hold.node)
            if len(self._resume) > _RESUME_ENTRIES:
                del self._resume[next(iter(self._resume))]
        self._private -= hold.private
        self._tick += 1
        node: PageRadixNode | None = hold.node
        while node is not None and node is not self._root:
            node.stamp = self._tick
            node = node.parent
        self._unlock(hold.node)

    # ---- hints, hooks, transfers ----------------------------------------------------------

    def hint(self, hint: KVHint) -> None:
        self.hints_seen[str(hint.kind)] += 1

    def before_forward(self, demand_tokens: int) -> None:
        """LRU does nothing ahead of time; eviction happens on demand in `reserve`."""

    def drain_transfers(self) -> tuple[Transfer, ...]:
        if not self._pending_d2h:
            return ()
        transfer = Transfer(TransferDirection.D2H, self._pending_d2h)
        self._pending_d2h = 0
        return (transfer,)

    def flush(self) -> None:
        stack = [self._root]
        while stack:
            node = stack.pop()
            for child in list(node.children.values()):
                if child.lock_ref == 0:
                    self._delete_subtree(child)
                else:
                    if child.device:  # a host copy of KV from the old weights is stale
                        self._set_host(child, False)
                    stack.append(child)

    def check_invariants(self) -> None:
        """Recount the tree and raise AssertionError on any broken invariant (for tests)."""
        device = host = locked = nodes = 0
        refs: dict[int, int] = {}
        for hold in self._holds.values():
            node: PageRadixNode | None = hold.node
            while node is not None and node is not self._root:
                refs[id(node)] = refs.get(id(node), 0) + 1
                node = node.parent
        stack = [self._root]
        while stack:
            parent = stack.pop()
            device_children = 0
            for first_page, child in parent.children.items():
                size = child.size
                assert child.alive and child.parent is parent, "a child is detached"
                assert size > 0 and size % self._page == 0, "a key is not whole pages"
                assert child.key[: self._page] == first_page, "a child is filed under a wrong key"
                assert child.device or child.host, "a node holds KV on no tier"
                assert not child.device or parent.device, "device residency is not prefix-closed"
                assert child.lock_ref == refs.get(id(child), 0), "lock_ref differs from holders"
                device_children += child.device
                device += size if child.device else 0
                host += size if child.host else 0
                locked += size if child.device and child.lock_ref else 0
                nodes += 1
                stack.append(child)
            assert parent.device_children == device_children, "device_children is stale"
        private = sum(hold.private for hold in self._holds.values())
        assert (device, host, locked, private, nodes) == (
            self._tree_device,
            self._host_used,
            self._locked_device,
            self._private,
            self._tree.node_count,
        ), "incremental counters differ from a recount"
        assert self._used() <= self._capacity, "device KV exceeds capacity"
        assert self._host_used <= self._host_capacity, "host KV exceeds capacity"

    # ---- matching -------------------------------------------------------------------------

    def _match_limit(self, token_ids: TokenSeq) -> int:
        return max(0, len(token_ids) - 1) // self._page * self._page

    def _split_tiers(self, path: list[PageRadixNode]) -> tuple[int, int, int]:
        """Device tokens, then host-only tokens along `path`, and the nodes of that prefix."""
        device = host = 0
        index = 0
        while index < len(path) and path[index].device:
            device += path[index].size
            index += 1
        while index < len(path) and path[index].host and not path[index].device:
            host += path[index].size
            index += 1
        return device, host, index

    def _hold(self, rid: str) -> _Hold:
        try:
            return self._holds[rid]
        except KeyError:
            raise ValueError(f"request {rid!r} holds no KV; call acquire() first") from None

    # ---- locks ----------------------------------------------------------------------------

    def _lock(self, node: PageRadixNode, stop: PageRadixNode) -> None:
        """Add one lock on every node from `node` up to, not including, `stop`."""
        while node is not stop and node is not self._root:
            if node.lock_ref == 0 and node.device:
                self._locked_device += node.size
            node.lock_ref += 1
            node = self._tree.parent(node)

    def _unlock(self, node: PageRadixNode) -> None:
        while node is not self._root:
            node.lock_ref -= 1
            if node.lock_ref == 0:
                if node.device:
                    self._locked_device -= node.size
                self._offer(node)
            node = self._tree.parent(node)

    # ---- residency ------------------------------------------------------------------------

    def _set_device(self, node: PageRadixNode, resident: bool) -> None:
        if node.device == resident:
            return
        node.device = resident
        size = node.size
        parent = self._tree.parent(node)
        if resident:
            self._tree_device += size
            parent.device_children += 1
        else:
            self._tree_device -= size
            parent.device_children -= 1
            self._offer(parent)
        self._offer(node)

    def _set_host(self, node: PageRadixNode, resident: bool) -> None:
        if node.host != resident:
            node.host = resident
            self._host_used += node.size if resident else -node.size

    def _copy_to_host(self, node: PageRadixNode) -> bool:
        """Give `node` a host copy if the host has room (after dropping LRU host-only leaves)."""
        size = node.size
        if self._host_capacity - self._host_used < size:
            while self._host_capacity - self._host_used < size:
                victim = self._pop(self._host_heap, device=False)
                if victim is None:
                    return False
                self._dropped += self._delete_subtree(victim)
        self._set_host(node, True)
        self._pending_d2h += size
        self._offloaded += size
        return True

    def _make_device_room(self, tokens: int) -> int:
        """Evict LRU device leaves until `tokens` are free; return the shortfall (0 if done)."""
        while self._capacity - self._used() < tokens:
            node = self._pop(self._device_heap, device=True)
            if node is None:
                return tokens - (self._capacity - self._used())
            self._evict_device(node)
        return 0

    def _evict_device(self, node: PageRadixNode) -> None:
        if node.host or (self._host_capacity and self._copy_to_host(node)):
            self._set_device(node, False)
            self._demoted += node.size
        else:
            self._dropped += self._delete_subtree(node)

    def _delete_subtree(self, node: PageRadixNode) -> int:
        """Remove `node` and everything below it from both tiers; return the tokens removed."""
        parent = self._tree.parent(node)
        removed = 0
        for doomed in self._tree.detach(node):
            removed += doomed.size
            if doomed.device:
                self._tree_device -= doomed.size
            self._set_host(doomed, False)
        if node.device:
            parent.device_children -= 1
        self._offer(parent)
        return removed

    # ---- eviction candidates --------------------------------------------------------------

    def _offer(self, node: PageRadixNode) -> None:
        """Push `node` on the heap it now qualifies for (validity is re-checked on pop)."""
        if node is self._root or node.lock_ref:
            return
        if node.device:
            if node.device_children == 0:
                heapq.heappush(self._device_heap, (node.stamp, node.node_id, node))
                self._compact(self._device_heap, device=True)
        elif node.host and not node.children:
            heapq.heappush(self._host_heap, (node.stamp, node.node_id, node))
            self._compact(self._host_heap, device=False)

    def _valid(self, entry: _HeapEntry, device: bool) -> bool:
        stamp, _, node = entry
        if not node.alive or node.lock_ref or node.stamp != stamp:
            return False
        if device:
            return node.device and node.device_children == 0
        return node.host and not node.device and not node.children

    def _pop(self, heap: list[_HeapEntry], device: bool) -> PageRadixNode | None:
        while heap:
            entry = heapq.heappop(heap)
            if self._valid(entry, device):
                return entry[2]
        return None

    def _compact(self, heap: list[_HeapEntry], device: bool) -> None:
        if len(heap) <= _HEAP_SLACK_FACTOR * self._tree.node_count + _HEAP_SLACK_MIN:
            return
        live = {id(e[2]): e for e in heap if self._valid(e, device)}
        heap[:] = list(live.values())
        heapq.heapify(heap)
