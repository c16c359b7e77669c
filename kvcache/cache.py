"""`TieredCache`: a two-tier (device, host) radix cache with locks, refs and leaf-up eviction.

The one writer of the radix tree. It keeps, incrementally, the occupancy of each tier, the
evictable device tokens and reclaimable host tokens per eviction class (so `evictable_size` is
O(1)), and two lazily-invalidated heaps of candidates: device leaves (no child on device, not
locked) and discardable host copies (host-only leaves, or backups of device-resident nodes).

Invariants (checked by `kvcache.checks.check_cache`): device residency is prefix-closed (a node on
device has its parent on device); every node holds its KV on at least one tier; locked nodes are
on device; refs equal the live sessions whose leaf is at or below the node. Policies decide *when*
to evict, offload or load; this class decides nothing about sessions or time.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from kvcache.accounting import KVAccounting
from kvcache.candidates import CandidateHeap
from kvcache.errors import CapacityError, InvariantError, ReceiptError
from kvcache.eviction_order import (
    EvictionAction,
    EvictionClass,
    class_index,
    eviction_action,
    eviction_class,
    host_reclaim_limit,
    should_offload,
)
from kvcache.page_keys import TokenSequence
from kvcache.tree import PathStep, RadixTree, TreeNode, diverging_paths
from kvcache.types import AllocationResult, InsertResult, LockReceipt, Priority

__all__ = ["CacheMatch", "LoadOutcome", "TierRules", "TieredCache"]

_CLASSES = len(EvictionClass)


@dataclass(frozen=True, slots=True)
class TierRules:
    """Per-policy eviction rules the cache applies.

    `offload_min_class`: evicted nodes of this class or higher go to host if it has room (None:
    never offload on eviction). `strict_host_reclaim`: host room for a node is made only by
    discarding strictly less protected host KV (see `host_reclaim_limit`).
    `reclaim_backups`: when that is not enough, host copies of device-resident nodes (backups:
    discarding one loses no KV, a later eviction of the node copies it out again) may go too,
    whatever their class, rather than the evicted node's KV being dropped.
    """

    offload_min_class: EvictionClass | None
    strict_host_reclaim: bool
    reclaim_backups: bool = False


@dataclass(frozen=True, slots=True)
class CacheMatch:
    """The cached prefix of a page-aligned token sequence, by tier."""

    steps: tuple[PathStep, ...]
    device_tokens: int
    host_tokens: int
    device_ready_at_s: float


@dataclass(frozen=True, slots=True)
class LoadOutcome:
    """Result of moving a host-only chain to device."""

    ok: bool
    loaded_tokens: int
    shortfall_tokens: int
    eviction: AllocationResult


class _Tally:
    """Mutable counters of one eviction run."""

    __slots__ = ("demoted", "dropped", "freed", "offloaded")

    def __init__(self) -> None:
        self.freed = 0
        self.offloaded = 0
        self.dropped = 0
        self.demoted = 0

    def add(self, action: EvictionAction, tokens: int) -> None:
        self.freed += tokens
        if action is EvictionAction.OFFLOAD:
            self.offloaded += tokens
        elif action is EvictionAction.DEMOTE:
            self.demoted += tokens
        else:
            self.dropped += tokens


class TieredCache:
    """Radix cache over two tiers. All sizes are in tokens."""

    def __init__(
        self,
        *,
        page_size: int,
        device_capacity_tokens: int,
        host_capacity_tokens: int,
        rules: TierRules,
        accounting: KVAccounting,
    ) -> None:
        self.tree = RadixTree(page_size)
        self.device_capacity_tokens = device_capacity_tokens
        self.host_capacity_tokens = host_capacity_tokens
        self.rules = rules
        self.accounting = accounting
        self.device_cached_tokens = 0
        self.host_cached_tokens = 0
        self.reserved_tokens = 0
        self._evictable = [0] * _CLASSES  # device tokens of unlocked nodes, by class
        self._host_reclaimable = [0] * _CLASSES  # host tokens of unpinned nodes, by class
        self._host_backups = [0] * _CLASSES  # of which copies of device-resident nodes
        seq = itertools.count()
        self._device_candidates = CandidateHeap(self.tree, device=True, seq=seq)
        self._host_candidates = CandidateHeap(self.tree, device=False, seq=seq)
        self._receipt_ids = itertools.count(1)
        self._receipts: dict[int, TreeNode] = {}
        self._sessions: dict[str, tuple[TreeNode, Priority]] = {}
        self._offloaded_sessions: set[str] = set()  # sessions whose leaf went to host
        self.tree.root.on_device = True  # the empty prefix is trivially resident

    # ----------------------------------------------------------------- sizes
    @property
    def free_device_tokens(self) -> int:
        return self.device_capacity_tokens - self.device_cached_tokens - self.reserved_tokens

    @property
    def free_host_tokens(self) -> int:
        return self.host_capacity_tokens - self.host_cached_tokens

    def evictable_tokens(self, max_class: EvictionClass | None) -> int:
        """Device tokens that eviction of classes up to `max_class` can free (None: nothing)."""
        if max_class is None:
            return 0
        return sum(self._evictable[: max_class + 1])

    def host_reclaimable_tokens(self, max_class: EvictionClass | None) -> int:
        """Host tokens that may be discarded for classes up to `max_class` (None: nothing)."""
        if max_class is None:
            return 0
        return sum(self._host_reclaimable[: max_class + 1])

    # ----------------------------------------------------------------- lookups
    @staticmethod
    def match_steps(walked: list[PathStep]) -> CacheMatch:
        """The cached prefix a walk found, by tier (one walk can serve a lookup and a lock)."""
        steps = tuple(walked)
        device = host = 0
        ready = 0.0
        for step in steps:
            if step.node.on_device:
                device += step.matched_tokens
                ready = max(ready, step.node.ready_at_s)
            else:
                host += step.matched_tokens
        return CacheMatch(steps, device, host, ready)

    def touch(self, steps: tuple[PathStep, ...], now_s: float) -> None:
        """Mark matched nodes as used at `now_s` (heap entries are re-keyed lazily on pop)."""
        for step in steps:
            if now_s > step.node.last_access_s:
                step.node.last_access_s = now_s

    # ----------------------------------------------------------------- locks
    def lock_steps(self, steps: list[PathStep], *, below: TreeNode | None = None) -> LockReceipt:
        """Lock the device-resident part of a walk made since the last change to the tree.

        `below`: the walk started under this device-resident node (root..`below` is locked
        too; see `lock_path`)."""
        return self.lock_path(steps, below=below)[0]

    def lock_path(
        self, steps: list[PathStep], *, below: TreeNode | None = None
    ) -> tuple[LockReceipt, float]:
        """`lock_steps`, also returning when the last in-flight copy into the locked path
        lands (max `ready_at_s` over it, read on the way up: one pass for both)."""
        last = below
        for step in steps:
            if not step.node.on_device:
                break
            last = step.node
            if step.matched_tokens < step.node.tokens:
                last = self._split(step.node, step.matched_tokens)
        node = last if last is not None else self.tree.root
        receipt_id = next(self._receipt_ids)
        self._receipts[receipt_id] = node
        ready = 0.0
        current = node
        while current.parent is not None:
            self._lock_node(current)
            if current.ready_at_s > ready:
                ready = current.ready_at_s
            current = current.parent
        return LockReceipt(receipt_id, node.end), ready

    def unlock(self, receipt: LockReceipt) -> None:
        """Release a lock; each receipt exactly once."""
        self._dec_lock(self._locked_node(receipt, release=True))

    def move_lock(self, receipt: LockReceipt, node: TreeNode) -> LockReceipt:
        """Trade `receipt` for a lock on root..`node` (device-resident), touching only the
        nodes where the two paths differ (SGLang's dec/inc_lock_ref pair after a chunk)."""
        old = self._locked_node(receipt, release=True)
        old_only, new_only = diverging_paths(old, node)
        for current in new_only:
            if not current.on_device:
                raise InvariantError(f"{current!r} is not on device and cannot be locked")
            self._lock_node(current)
        for current in old_only:
            self._unlock_node(current)
        receipt_id = next(self._receipt_ids)
        self._receipts[receipt_id] = node
        return LockReceipt(receipt_id, node.end)

    def _locked_node(self, receipt: LockReceipt, *, release: bool) -> TreeNode:
        """The node `receipt` locks (forgotten with `release`); ReceiptError if not held."""
        node = (self._receipts.pop if release else self._receipts.get)(receipt.receipt_id, None)
        if node is None:
            raise ReceiptError(
                f"lock receipt {receipt.receipt_id} is unknown: it was already released or was "
                "issued by another cache; release each receipt exactly once"
            )
        return node

    def locked_nodes(self) -> list[TreeNode]:
        """The deepest node of every outstanding lock (for invariant checks)."""
        return list(self._receipts.values())

    def _inc_lock(self, node: TreeNode) -> None:
        while node.parent is not None:
            self._lock_node(node)
            node = node.parent

    def _lock_node(self, node: TreeNode) -> None:
        # Only the first lock changes what eviction may take (locked nodes are on device).
        if node.lock_ref == 0 and node.on_device:
            self._evictable[node.ref_class] -= node.tokens
        node.lock_ref += 1

    def _dec_lock(self, node: TreeNode) -> None:
        while node.parent is not None:
            self._unlock_node(node)
            node = node.parent

    def _unlock_node(self, node: TreeNode) -> None:
        node.lock_ref -= 1
        if node.lock_ref > 0:
            return
        if node.lock_ref < 0:
            raise InvariantError(f"{node!r}: lock_ref went negative; a receipt was replayed")
        if node.on_device:
            self._evictable[node.ref_class] += node.tokens
            if not node.device_children:  # a device leaf: evictable now
                self._device_candidates.push(node)  # (a lock never changes host candidacy)

    # ----------------------------------------------------------------- session refs
    def set_session(self, session_id: str, priority: Priority, leaf: TreeNode) -> None:
        """Make `session_id` reference root..`leaf` at `priority` (moving any earlier refs)."""
        previous = self._sessions.get(session_id)
        if previous is not None and previous[1] == priority:
            if previous[0] is leaf:
                return
            old_only, new_only = diverging_paths(previous[0], leaf)
            for node in old_only:
                self._add_ref(node, priority, -1)
            for node in new_only:
                self._add_ref(node, priority, +1)
            previous[0].leaf_sessions.discard(session_id)
            leaf.leaf_sessions.add(session_id)
            self._sessions[session_id] = (leaf, priority)
            return
        if previous is not None:
            self._apply_refs(previous[0], previous[1], -1)
            previous[0].leaf_sessions.discard(session_id)
        self._apply_refs(leaf, priority, +1)
        leaf.leaf_sessions.add(session_id)
        self._sessions[session_id] = (leaf, priority)

    def remove_session(self, session_id: str) -> None:
        """Drop the refs of a session (no-op if it never referenced anything)."""
        previous = self._sessions.pop(session_id, None)
        if previous is not None:
            self._apply_refs(previous[0], previous[1], -1)
            previous[0].leaf_sessions.discard(session_id)

    def session_leaf(self, session_id: str) -> TreeNode | None:
        entry = self._sessions.get(session_id)
        return entry[0] if entry is not None else None

    def take_offloaded_sessions(self) -> set[str]:
        """Sessions whose context's last node was offloaded since the last call (then cleared).

        Lets a policy notice KV that eviction, not the policy itself, moved to host.
        """
        taken, self._offloaded_sessions = self._offloaded_sessions, set()
        return taken

    def session_refs(self) -> dict[str, tuple[TreeNode, Priority]]:
        """Every referencing session's leaf and priority (a copy, for invariant checks)."""
        return dict(self._sessions)

    def _apply_refs(self, leaf: TreeNode, priority: Priority, delta: int) -> None:
        node = leaf
        while node.parent is not None:
            self._add_ref(node, priority, delta)
            node = node.parent

    def _add_ref(self, node: TreeNode, priority: Priority, delta: int) -> None:
        before = node.ref_class
        if priority is Priority.HIGH:
            node.high_ref += delta
        else:
            node.low_ref += delta
        if node.high_ref < 0 or node.low_ref < 0:
            raise InvariantError(f"{node!r}: a session ref went negative")
        after = node.ref_class = class_index(node.high_ref, node.low_ref)
        if after == before:
            return  # most refs land on nodes that keep their class: nothing to recount
        if node.on_device and node.lock_ref == 0:
            self._evictable[before] -= node.tokens
            self._evictable[after] += node.tokens
        if node.on_host and node.host_pin == 0:
            self._host_reclaimable[before] -= node.tokens
            self._host_reclaimable[after] += node.tokens
            if node.on_device:
                self._host_backups[before] -= node.tokens
                self._host_backups[after] += node.tokens
        if after < before:
            self._refresh(node)  # the key decreased: the old heap entry sorts too late

    # ----------------------------------------------------------------- space
    def reserve(self, n_tokens: int, max_class: EvictionClass | None) -> AllocationResult:
        """Reserve `n_tokens` of device KV, evicting classes up to `max_class` if needed.

        All or nothing: if even evicting everything allowed cannot make room, nothing is evicted
        and `shortfall_tokens` says exactly how much is missing.
        """
        if n_tokens < 0:
            raise ValueError(f"cannot reserve a negative number of tokens ({n_tokens})")
        needed = n_tokens - self.free_device_tokens
        if needed > 0:
            available = self.evictable_tokens(max_class)
            if available < needed:
                return AllocationResult(
                    ok=False, requested_tokens=n_tokens, shortfall_tokens=needed - available
                )
            tally = self.evict(needed, max_class)
        else:
            tally = _Tally()
        self.reserved_tokens += n_tokens
        return AllocationResult(
            ok=True,
            requested_tokens=n_tokens,
            freed_tokens=tally.freed,
            offloaded_tokens=tally.offloaded,
            dropped_tokens=tally.dropped,
            demoted_tokens=tally.demoted,
        )

    def release(self, n_tokens: int) -> None:
        """Return reserved device tokens that will not be cached."""
        if n_tokens < 0 or n_tokens > self.reserved_tokens:
            raise CapacityError(
                f"cannot release {n_tokens} tokens: {self.reserved_tokens} are reserved; release "
                "only what `reserve` granted and `insert` did not consume"
            )
        self.reserved_tokens -= n_tokens

    def evict(self, needed_tokens: int, max_class: EvictionClass | None) -> _Tally:
        """Free at least `needed_tokens` device tokens leaf-up (fewer only if nothing is left)."""
        tally = _Tally()
        if max_class is None:
            return tally
        while tally.freed < needed_tokens:
            node = self._device_candidates.pop(max_class)
            if node is None:
                break
            tokens = node.tokens
            node_class = eviction_class(node.high_ref, node.low_ref)
            offload = should_offload(node_class, self.rules.offload_min_class)
            tally.add(self._free_device(node, offload), tokens)
        return tally

    # ----------------------------------------------------------------- KV in/out
    def insert(
        self,
        tokens: TokenSequence,
        now_s: float,
        reserved_tokens: int,
        *,
        end: int | None = None,
        below: LockReceipt | None = None,
    ) -> tuple[InsertResult, TreeNode]:
        """Cache `tokens[:end]` (whole pages) on device, consuming the caller's reservation.

        Tokens not yet on device are paid from `reserved_tokens`, then from free space; the
        unused part of the reservation is returned. Returns the result and the path's last node.
        `below`: a lock the caller holds on a prefix of `tokens` (a running request's); the
        walk starts under it instead of comparing that whole prefix again.
        """
        if reserved_tokens < 0 or reserved_tokens > self.reserved_tokens:
            raise CapacityError(
                f"insert hands over {reserved_tokens} reserved tokens but only "
                f"{self.reserved_tokens} are reserved; pass what `reserve` granted for this KV"
            )
        tree = self.tree
        limit = len(tokens) if end is None else min(end, len(tokens))
        keys = tree.page_keys(tokens, limit)
        top, offset = self._known_prefix(keys, limit, below)
        steps = tree.walk_keys(keys, limit // tree.page_size, top, offset // tree.page_size)
        new_tokens = limit - offset - self.match_steps(steps).device_tokens
        if new_tokens > reserved_tokens + self.free_device_tokens:
            raise CapacityError(
                f"inserting {new_tokens} new device tokens needs a reservation: only "
                f"{reserved_tokens} reserved + {self.free_device_tokens} free; call `reserve` "
                "for the KV a request computes before caching it"
            )
        self.reserved_tokens -= reserved_tokens
        path = self._ensure_path(tokens, keys, limit, steps, top, offset)
        for node in path:
            if not node.on_device:
                self._set_device(node, True)
            if now_s > node.last_access_s:
                node.last_access_s = now_s
        ancestor: TreeNode | None = top
        while ancestor is not None and ancestor.parent is not None:
            if now_s > ancestor.last_access_s:
                ancestor.last_access_s = now_s
            ancestor = ancestor.parent
        leaf = path[-1] if path else top
        self._refresh(leaf)
        return (
            InsertResult(
                cached_tokens=limit,
                new_device_tokens=new_tokens,
                returned_reserved_tokens=max(0, reserved_tokens - new_tokens),
            ),
            leaf,
        )

    def _known_prefix(
        self, keys: Sequence[int], limit: int, below: LockReceipt | None
    ) -> tuple[TreeNode, int]:
        """Where a walk over the page `keys` of `tokens[:limit]` may start: under the caller's
        locked node if that lock covers a prefix of them (checked by its last page key, which
        stands for the whole prefix), else at the root."""
        if below is None:
            return self.tree.root, 0
        node = self._locked_node(below, release=False)
        depth = node.end
        if node.parent is None or depth > limit:
            return self.tree.root, 0
        if keys[depth // self.tree.page_size - 1] != node.last_page_key:
            raise ReceiptError(
                f"lock receipt {below.receipt_id} covers tokens that are not a prefix of the "
                "inserted sequence; move a request's lock only onto its own continuation"
            )
        return node, depth

    def host_chain(
        self, tokens: TokenSequence, *, end: int | None = None, below: LockReceipt | None = None
    ) -> list[TreeNode]:
        """The host-only nodes of the cached prefix of `tokens[:end]`, top-down (splitting the
        last). `below`: a lock the caller holds on a prefix of `tokens` (see `insert`)."""
        tree = self.tree
        limit = len(tokens) if end is None else min(end, len(tokens))
        keys = tree.page_keys(tokens, limit)
        top, offset = self._known_prefix(keys, limit, below)
        chain: list[TreeNode] = []
        for step in tree.walk_keys(keys, limit // tree.page_size, top, offset // tree.page_size):
            node = step.node
            if node.on_device:
                continue
            if step.matched_tokens < node.tokens:
                node = self._split(node, step.matched_tokens)
            chain.append(node)
        return chain

    def session_host_chain(self, leaf: TreeNode) -> list[TreeNode]:
        """The host-only nodes on root..`leaf`, top-down."""
        chain: list[TreeNode] = []
        node = leaf
        while node.parent is not None and not node.on_device:
            chain.append(node)
            node = node.parent
        chain.reverse()
        return chain

    def load_chain(
        self,
        chain: list[TreeNode],
        max_class: EvictionClass | None,
        now_s: float,
        ready_at_s: float,
    ) -> LoadOutcome:
        """Copy a host-only chain (top-down, hanging off a device node) to device.

        Evicts classes up to `max_class` for room; all or nothing. The host copies stay, so a
        later eviction of these nodes is a free demote.
        """
        need = sum(node.tokens for node in chain)
        if need == 0:
            return LoadOutcome(True, 0, 0, AllocationResult(ok=True, requested_tokens=0))
        anchor = chain[0].parent
        if anchor is None or not anchor.on_device:
            raise InvariantError("a host chain must hang off a device-resident node")
        self._inc_lock(anchor)  # the prefix the chain extends must survive our own eviction
        for node in chain:
            self._pin_host(node, +1)
        try:
            allocation = self.reserve(need, max_class)
            if allocation.ok:
                self.reserved_tokens -= need
                for node in chain:
                    self._set_device(node, True)
                    node.ready_at_s = ready_at_s
                    if now_s > node.last_access_s:
                        node.last_access_s = now_s
                self.accounting.h2d_tokens += need
        finally:
            for node in chain:
                self._pin_host(node, -1)
            self._dec_lock(anchor)
        for node in chain:
            self._refresh(node)
        if not allocation.ok:
            return LoadOutcome(False, 0, allocation.shortfall_tokens, allocation)
        return LoadOutcome(True, need, 0, allocation)

    def offload_exclusive(self, leaf: TreeNode) -> tuple[int, int]:
        """Move the device KV only this session needs (refs == 1, unlocked) to host, leaf-up.

        Never drops anything: stops at the first node for which the host has no room, that is
        shared, locked, or still has another child on device. Returns (offloaded, demoted) tokens.
        """
        offloaded = demoted = 0
        node = leaf
        while node.parent is not None and node.high_ref + node.low_ref == 1 and not node.lock_ref:
            if node.on_device:
                if node.device_children:
                    break
                if node.on_host:
                    demoted += node.tokens
                    self._demote(node)
                elif self._make_host_room(node):
                    offloaded += node.tokens
                    self._offload(node)
                else:
                    break
            node = node.parent
        return offloaded, demoted

    def exclusive_device_tokens(self, leaf: TreeNode) -> int:
        """Device tokens `offload_exclusive(leaf)` would free if the host had room."""
        tokens = 0
        child_goes = False  # the path child below is on device and would be offloaded first
        node = leaf
        while node.parent is not None and node.high_ref + node.low_ref == 1 and not node.lock_ref:
            if node.on_device:
                if node.device_children - (1 if child_goes else 0):
                    break
                tokens += node.tokens
                child_goes = True
            else:
                child_goes = False
            node = node.parent
        return tokens

    # ----------------------------------------------------------------- internals: tiers
    def _free_device(self, node: TreeNode, offload: bool) -> EvictionAction:
        """Evict one device candidate: demote, offload, or drop it (and its host-only subtree)."""
        room = (not node.on_host) and offload and self._make_host_room(node)
        action = eviction_action(on_host=node.on_host, offload=offload, host_has_room=room)
        if action is EvictionAction.DEMOTE:
            self._demote(node)
        elif action is EvictionAction.OFFLOAD:
            self._offload(node)
        else:
            self._drop_subtree(node)
        return action

    def _make_host_room(self, node: TreeNode) -> bool:
        """Make host room for `node`'s KV, discarding only allowed KV (False: impossible)."""
        need = node.tokens
        if self.free_host_tokens >= need:
            return True
        node_class = eviction_class(node.high_ref, node.low_ref)
        limit = host_reclaim_limit(node_class, self.rules.strict_host_reclaim)
        room = self.free_host_tokens + self.host_reclaimable_tokens(limit)
        if room < need:
            if not self.rules.reclaim_backups:
                return False
            return self._make_host_room_with_backups(need, limit, room)
        while limit is not None and self.free_host_tokens < need:
            victim = self._host_candidates.pop(limit)
            if victim is None:
                raise InvariantError("host reclaim counters promised room that the heap lacks")
            if victim.on_device:
                self._set_host(victim, False)
            else:
                self._drop_subtree(victim)
        return True

    def _make_host_room_with_backups(
        self, need: int, limit: EvictionClass | None, room: int
    ) -> bool:
        """`_make_host_room` past the strict limit: also discard backups of any class, in
        eviction order; host-only KV above `limit` is skipped (False: still no room)."""
        above = 0 if limit is None else limit + 1
        if room + sum(self._host_backups[above:]) < need:
            return False
        skipped: list[TreeNode] = []
        while self.free_host_tokens < need:
            victim = self._host_candidates.pop(EvictionClass.HIGH_REF)
            if victim is None:
                raise InvariantError("host backup counters promised room that the heap lacks")
            if victim.on_device:
                self._set_host(victim, False)
            elif limit is not None and victim.ref_class <= limit:
                self._drop_subtree(victim)
            else:
                skipped.append(victim)
        for victim in skipped:
            self._host_candidates.push(victim)
        return True

    def _offload(self, node: TreeNode) -> None:
        self._offloaded_sessions.update(node.leaf_sessions)
        self._set_host(node, True)
        self._set_device(node, False)
        self.accounting.d2h_tokens += node.tokens
        self.accounting.offloads += 1
        self.accounting.offloaded_tokens += node.tokens

    def _demote(self, node: TreeNode) -> None:
        self._set_device(node, False)
        self.accounting.demoted_tokens += node.tokens

    def _set_device(self, node: TreeNode, resident: bool) -> None:
        """Give `node` a device copy or take it away (the counters change as `_count` says:
        a device copy is evictable while unlocked and makes an unpinned host copy a backup)."""
        parent = node.parent
        if parent is None:
            raise InvariantError("the root's residency is fixed")
        if node.on_device == resident:
            raise InvariantError(f"{node!r} is already {'on' if resident else 'off'} device")
        tokens = node.tokens if resident else -node.tokens
        if not node.lock_ref:
            self._evictable[node.ref_class] += tokens
        if node.on_host and not node.host_pin:
            self._host_backups[node.ref_class] += tokens
        node.on_device = resident
        self.device_cached_tokens += tokens
        if resident:
            parent.device_children += 1
        else:
            parent.device_children -= 1
            self._refresh(parent)
        # Either way the node's candidacy may change: a device copy makes its host copy a
        # discardable backup, and a device leaf is evictable.
        self._refresh(node)

    def _set_host(self, node: TreeNode, resident: bool) -> None:
        """Give `node` a host copy or take it away (an unpinned one is reclaimable, and a
        backup too while the node is on device; see `_count`)."""
        if node.on_host == resident:
            raise InvariantError(f"{node!r} is already {'on' if resident else 'off'} host")
        tokens = node.tokens if resident else -node.tokens
        if not node.host_pin:
            self._host_reclaimable[node.ref_class] += tokens
            if node.on_device:
                self._host_backups[node.ref_class] += tokens
        node.on_host = resident
        self.host_cached_tokens += tokens

    def _pin_host(self, node: TreeNode, delta: int) -> None:
        """Pin (+1) or unpin (-1) `node`'s host copy: a pinned copy may not be discarded, so it
        leaves the host counters while pinned (`_count`); nothing else sees a pin."""
        was_free = node.host_pin == 0
        node.host_pin += delta
        is_free = node.host_pin == 0
        if node.on_host and was_free != is_free:
            tokens = node.tokens if is_free else -node.tokens
            self._host_reclaimable[node.ref_class] += tokens
            if node.on_device:
                self._host_backups[node.ref_class] += tokens

    def _drop_subtree(self, node: TreeNode) -> None:
        """Discard `node` and all below it (all host-only); its sessions move up to the parent."""
        parent = node.parent
        if parent is None:
            raise InvariantError("the root cannot be dropped")
        order: list[TreeNode] = []
        stack = [node]
        while stack:
            current = stack.pop()
            order.append(current)
            stack.extend(current.children.values())
        for current in reversed(order):  # children before parents
            if current.lock_ref or current.host_pin:
                raise InvariantError(f"{current!r} is locked or pinned and cannot be dropped")
            self._uncount(current)
            if current.on_device:
                self.device_cached_tokens -= current.tokens
                if current.parent is not None:
                    current.parent.device_children -= 1
            if current.on_host:
                self.host_cached_tokens -= current.tokens
            self.accounting.dropped_tokens += current.tokens
            for session_id in current.leaf_sessions:
                _, priority = self._sessions[session_id]
                self._sessions[session_id] = (parent, priority)
                parent.leaf_sessions.add(session_id)
            current.leaf_sessions.clear()
            current.on_device = current.on_host = False
            current.device_seq = current.host_seq = -1
            self.tree.unlink(current)
        self._refresh(parent)

    # ----------------------------------------------------------------- internals: structure
    def _split(self, node: TreeNode, at_tokens: int) -> TreeNode:
        upper = self.tree.split(node, at_tokens)
        self._refresh(upper)
        return upper

    def _ensure_path(
        self,
        tokens: TokenSequence,
        keys: Sequence[int],
        limit: int,
        steps: list[PathStep],
        top: TreeNode,
        offset: int,
    ) -> list[TreeNode]:
        """Nodes below `top` (which covers `tokens[:offset]`) covering exactly `tokens[:limit]`
        (page `keys`), walked as `steps`, splitting and adding as needed (no KV changes)."""
        tree = self.tree
        path: list[TreeNode] = []
        node = top
        for step in steps:
            child = step.node
            if step.matched_tokens < child.tokens:
                child = self._split(child, step.matched_tokens)
            path.append(child)
            offset += step.matched_tokens
            node = child
        if offset < limit:
            page = tree.page_size
            path.append(
                tree.add_child(node, tokens[offset:limit], keys[offset // page : limit // page])
            )
        return path

    # ----------------------------------------------------------------- internals: counters
    def _count(self, node: TreeNode) -> None:
        node_class = node.ref_class
        if node.on_device and node.lock_ref == 0:
            self._evictable[node_class] += node.tokens
        if node.on_host and node.host_pin == 0:
            self._host_reclaimable[node_class] += node.tokens
            if node.on_device:
                self._host_backups[node_class] += node.tokens

    def _uncount(self, node: TreeNode) -> None:
        node_class = node.ref_class
        if node.on_device and node.lock_ref == 0:
            self._evictable[node_class] -= node.tokens
        if node.on_host and node.host_pin == 0:
            self._host_reclaimable[node_class] -= node.tokens
            if node.on_device:
                self._host_backups[node_class] -= node.tokens

    def uncovered_candidates(self) -> list[TreeNode]:
        """Eviction candidates missing from their heap (always empty unless a bug; checks)."""
        return self._device_candidates.uncovered() + self._host_candidates.uncovered()

    def counters(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(evictable device tokens by class, reclaimable host tokens by class), for checks."""
        return tuple(self._evictable), tuple(self._host_reclaimable)

    def backup_counters(self) -> tuple[int, ...]:
        """Unpinned host copies of device-resident nodes, tokens by class (for checks)."""
        return tuple(self._host_backups)

    # ----------------------------------------------------------------- internals: heaps
    def _refresh(self, node: TreeNode) -> None:
        """Push fresh candidate entries for `node` (it may have become one, or its key dropped).

        The tier tests are `is_device_candidate`/`is_host_candidate` minus liveness, inlined:
        this runs millions of times and most nodes are interior, so candidates of neither."""
        if node.on_device and not node.device_children and not node.lock_ref:
            self._device_candidates.push(node)
        if node.on_host and not node.host_pin and (node.on_device or not node.children):
            self._host_candidates.push(node)
