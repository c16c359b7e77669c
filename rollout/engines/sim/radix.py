"""`PageRadixTree`: token sequences in whole pages, shared by common prefix (structure only).

Nodes carry the per-node state a cache policy keeps (tier flags, lock count, recency); the tree
only finds, adds, splits and removes nodes and never decides what is resident. A node's end
position (tokens from the root) is fixed for its whole life: splitting adds the upper part as a
new node above it, and nodes are never merged.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from rollout.engines.sim.kv import Tokens, TokenSeq

__all__ = ["PageRadixNode", "PageRadixTree"]


class PageRadixNode:
    """One edge of the tree: `key` (whole pages) below `parent`, children keyed by first page."""

    __slots__ = (
        "alive",
        "children",
        "device",
        "device_children",
        "host",
        "key",
        "lock_ref",
        "node_id",
        "parent",
        "stamp",
    )

    def __init__(self, key: Tokens, parent: PageRadixNode | None, node_id: int, stamp: int) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[Tokens, PageRadixNode] = {}
        self.device = False  # holds KV on the device
        self.host = False  # holds a copy on the host
        self.lock_ref = 0  # live requests whose path passes here
        self.device_children = 0  # children with device=True
        self.node_id = node_id
        self.stamp = stamp  # recency (a logical tick)
        self.alive = True


class PageRadixTree:
    """The nodes of one cache, `page_tokens` per page."""

    def __init__(self, page_tokens: int) -> None:
        self.page = page_tokens
        self._ids = itertools.count(1)
        self.root = PageRadixNode((), None, 0, 0)
        self.node_count = 0

    def walk(
        self, ids: TokenSeq, node: PageRadixNode, pos: int, limit: int
    ) -> tuple[PageRadixNode, int, list[PageRadixNode]]:
        """Follow `ids[pos:limit]` down from `node` (which ends at `pos`) in whole pages.

        A partly matched node is split at the last matching page. Returns the deepest matched
        node, its end position and the nodes passed below the start.
        """
        page = self.page
        path: list[PageRadixNode] = []
        while pos + page <= limit:
            child = node.children.get(ids[pos : pos + page])
            if child is None:
                break
            end = pos + len(child.key)
            if end <= limit and ids[pos:end] == child.key:
                node, pos = child, end
                path.append(child)
                continue
            matched = self._common_pages(ids, pos, limit, child.key)
            child = self.split(child, matched)
            path.append(child)
            return child, pos + matched, path
        return node, pos, path

    def _common_pages(self, ids: TokenSeq, pos: int, limit: int, key: Tokens) -> int:
        """Tokens (whole pages, at least one) `ids[pos:limit]` shares with the start of `key`."""
        page = self.page
        low = 1  # pages known to match (the child was found by its first page)
        high = min(len(key), limit - pos) // page
        while low < high:
            mid = (low + high + 1) // 2
            if ids[pos : pos + mid * page] == key[: mid * page]:
                low = mid
            else:
                high = mid - 1
        return low * page

    def split(self, node: PageRadixNode, at: int) -> PageRadixNode:
        """Cut `node` after `at` tokens; return the new upper part (same state as `node`)."""
        parent = self.parent(node)
        upper = PageRadixNode(node.key[:at], parent, next(self._ids), node.stamp)
        upper.device, upper.host, upper.lock_ref = node.device, node.host, node.lock_ref
        upper.device_children = 1 if node.device else 0
        node.key = node.key[at:]
        node.parent = upper
        upper.children[node.key[: self.page]] = node
        parent.children[upper.key[: self.page]] = upper
        self.node_count += 1
        return upper

    def add_child(self, parent: PageRadixNode, key: Tokens, stamp: int) -> PageRadixNode:
        """A new node under `parent` (no tier, no lock: the caller sets them)."""
        child = PageRadixNode(key, parent, next(self._ids), stamp)
        parent.children[key[: self.page]] = child
        self.node_count += 1
        return child

    def detach(self, node: PageRadixNode) -> list[PageRadixNode]:
        """Remove `node` and its subtree; return the removed nodes (now marked dead)."""
        del self.parent(node).children[node.key[: self.page]]
        removed: list[PageRadixNode] = []
        stack = [node]
        while stack:
            doomed = stack.pop()
            stack.extend(doomed.children.values())
            doomed.alive = False
            removed.append(doomed)
        self.node_count -= len(removed)
        return removed

    def parent(self, node: PageRadixNode) -> PageRadixNode:
        if node.parent is None:
            raise RuntimeError("the radix root has no parent; this is a bug in the caller")
        return node.parent

    def end_of(self, node: PageRadixNode) -> int:
        """Tokens from the root to the end of `node` (constant while the node lives)."""
        end = 0
        while node is not self.root:
            end += len(node.key)
            node = self.parent(node)
        return end

    def path_to(self, node: PageRadixNode) -> list[PageRadixNode]:
        """The nodes from below the root down to `node`."""
        path: list[PageRadixNode] = []
        while node is not self.root:
            path.append(node)
            node = self.parent(node)
        path.reverse()
        return path

    def nodes(self) -> Iterator[PageRadixNode]:
        """Every node below the root, parents before children."""
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())
