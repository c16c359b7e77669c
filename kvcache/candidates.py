"""Eviction candidates: lazily invalidated min-heaps of tree nodes ordered by eviction key.

A node is pushed when it becomes a candidate or its key decreases; stale entries (superseded by
a newer push, or whose node stopped being a candidate) are skipped on pop, and an entry whose
node's key grew since the push is re-keyed on pop. So no operation scans the tree, and a heap
grown past a multiple of the live nodes is rebuilt (amortised O(1) per push).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from kvcache.tree import RadixTree, TreeNode

__all__ = ["CandidateHeap", "is_device_candidate", "is_host_candidate"]

_HeapEntry = tuple[int, float, int, TreeNode]
# Rebuild when entries outnumber live nodes this many times over, plus a floor for tiny trees.
_HEAP_SLACK_FACTOR = 2
_HEAP_SLACK_MIN = 1024


def is_device_candidate(node: TreeNode) -> bool:
    """Evictable from device now: resident, unlocked, and no child on device (leaf-up)."""
    return (
        node.alive
        and node.parent is not None
        and node.on_device
        and node.device_children == 0
        and node.lock_ref == 0
    )


def is_host_candidate(node: TreeNode) -> bool:
    """Host copy discardable now: unpinned, and either a backup or a host-only leaf."""
    return (
        node.alive
        and node.parent is not None
        and node.on_host
        and node.host_pin == 0
        and (node.on_device or not node.children)
    )


class CandidateHeap:
    """Candidates of one tier; `device` picks the tier (and the node's sequence field)."""

    def __init__(self, tree: RadixTree, *, device: bool, seq: itertools.count[int]) -> None:
        self._tree = tree
        self._device = device
        self._seq = seq
        self._is_candidate: Callable[[TreeNode], bool] = (
            is_device_candidate if device else is_host_candidate
        )
        self._heap: list[_HeapEntry] = []

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, node: TreeNode) -> None:
        """Make sure `node` has an entry no later than its current key, if it is a candidate.

        A node that already has an entry whose class is not above its current one keeps it
        (its key can only have grown since, which `pop` re-keys); most refreshes are such
        no-ops, so the heap does not fill with duplicates.
        """
        key_class = node.ref_class
        if self._device:
            has_entry = node.device_seq >= 0 and node.device_entry_class <= key_class
        else:
            has_entry = node.host_seq >= 0 and node.host_entry_class <= key_class
        if has_entry or not self._is_candidate(node):
            return  # (an entry of a node that stopped being a candidate is dropped on pop)
        heapq.heappush(
            self._heap, (key_class, node.last_access_s, self._stamp(node, key_class), node)
        )
        if len(self._heap) > _HEAP_SLACK_FACTOR * self._tree.node_count + _HEAP_SLACK_MIN:
            self._rebuild()

    def uncovered(self) -> list[TreeNode]:
        """Candidates with no live entry at or below their key's class (for invariant checks:
        eviction would never reach them)."""
        live = {(seq, id(node)) for _, _, seq, node in self._heap}
        return [
            node
            for node in self._tree.iter_nodes()
            if self._is_candidate(node)
            and not (
                (self._live_seq(node), id(node)) in live
                and self._entry_class(node) <= node.ref_class
            )
        ]

    def pop(self, max_class: int) -> TreeNode | None:
        """Remove and return the minimum candidate if its class is at most `max_class`."""
        heap = self._heap
        while heap:
            key_class, last_access_s, seq, node = heap[0]
            if self._live_seq(node) != seq:
                heapq.heappop(heap)  # superseded by a later entry of the same node
                continue
            if not self._is_candidate(node):
                heapq.heappop(heap)
                self._set_seq(node, -1, -1)  # the node has no entry now
                continue
            current_class = node.ref_class
            if (key_class, last_access_s) != (current_class, node.last_access_s):
                heapq.heapreplace(  # the key grew since the push: re-key lazily
                    heap,
                    (current_class, node.last_access_s, self._stamp(node, current_class), node),
                )
                continue
            if key_class > max_class:
                return None
            heapq.heappop(heap)
            self._set_seq(node, -1, -1)
            return node
        return None

    def _rebuild(self) -> None:
        heap: list[_HeapEntry] = []
        for node in self._tree.iter_nodes():
            if self._is_candidate(node):
                key_class = node.ref_class
                heap.append((key_class, node.last_access_s, self._stamp(node, key_class), node))
            else:
                self._set_seq(node, -1, -1)  # its entries are dropped with the old heap
        heapq.heapify(heap)
        self._heap = heap

    def _stamp(self, node: TreeNode, key_class: int) -> int:
        seq = next(self._seq)
        self._set_seq(node, seq, key_class)
        return seq

    def _live_seq(self, node: TreeNode) -> int:
        return node.device_seq if self._device else node.host_seq

    def _entry_class(self, node: TreeNode) -> int:
        return node.device_entry_class if self._device else node.host_entry_class

    def _set_seq(self, node: TreeNode, seq: int, key_class: int) -> None:
        """Record the node's one live entry here (`seq` -1: none)."""
        if self._device:
            node.device_seq = seq
            node.device_entry_class = key_class
        else:
            node.host_seq = seq
            node.host_entry_class = key_class
