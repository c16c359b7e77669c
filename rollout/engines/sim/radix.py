"""`PageRadixTree`: token sequences in whole pages, shared by common prefix (structure only).

Nodes carry the per-node state a cache policy keeps (tier flags, lock count, recency); the tree
only finds, adds, splits and removes nodes and never decides what is resident. A node's end
position (tokens from the root) is fixed for its whole life: splitting adds the upper part as a
new node above it, and nodes are never merged.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from kvcache.page_keys import append_only_origin
from rollout.engines.sim.kv import Tokens, TokenSeq

__all__ = ["PageRadixNode", "PageRadixTree"]

# Lists a node remembers as equal to its key: a group's samples share a prompt (8 per group in
# the shipped workloads); the oldest is forgotten first.
_SEEN_LISTS = 8


class PageRadixNode:
    """One edge of the tree: `key` (whole pages) below `parent`, children keyed by first page.

    The key may be kept as a position in an append-only list (`origin`, `origin_start`) instead
    of a copy: a prefill chunk's pages are committed this way (copying every recomputed chunk
    was a sixth of a long-context simulation's CPU), and a later turn of the same context
    matches them without comparing tokens. `key` copies them out the first time another
    sequence must be compared with them. A list once found equal to the key is remembered
    (`seen_in`; append-only lists never change where they were compared).
    """

    __slots__ = (
        "_key",
        "alive",
        "children",
        "device",
        "device_children",
        "first_page",
        "host",
        "lock_ref",
        "node_id",
        "origin",
        "origin_start",
        "parent",
        "seen_in",
        "size",
        "stamp",
    )

    def __init__(
        self,
        key: Tokens | None,
        parent: PageRadixNode | None,
        node_id: int,
        stamp: int,
        *,
        first_page: Tokens = (),
        size: int = 0,
        origin: list[int] | None = None,
        origin_start: int = 0,
    ) -> None:
        self._key = key
        self.size = len(key) if key is not None else size  # tokens (whole pages)
        self.first_page = first_page  # the key under which `parent` files it
        self.origin = origin  # the append-only list the key is a slice of (None: no list)
        self.origin_start = origin_start
        # Other append-only lists found equal to the key at its place (the contexts of sibling
        # samples that share this prompt): compared once each, not on every turn.
        self.seen_in: tuple[list[int], ...] = ()
        self.parent = parent
        self.children: dict[Tokens, PageRadixNode] = {}
        self.device = False  # holds KV on the device
        self.host = False  # holds a copy on the host
        self.lock_ref = 0  # live requests whose path passes here
        self.device_children = 0  # children with device=True
        self.node_id = node_id
        self.stamp = stamp  # recency (a logical tick)
        self.alive = True

    @property
    def key(self) -> Tokens:
        """The node's tokens (copied out of `origin` on first use)."""
        key = self._key
        if key is None:
            assert self.origin is not None, "a radix node has neither a key nor an origin"
            start = self.origin_start
            key = self._key = tuple(self.origin[start : start + self.size])
        return key


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
        origin = append_only_origin(ids)
        base, shared = origin if origin is not None else (None, 0)
        while pos + page <= limit:
            child = node.children.get(ids[pos : pos + page])
            if child is None:
                break
            end = pos + child.size
            if end <= limit:
                if base is not None and end <= shared:
                    # A key cut from this append-only list at this place, or found equal to it
                    # here before, is equal unseen.
                    if (child.origin is base and child.origin_start == pos) or _holds(
                        child.seen_in, base
                    ):
                        node, pos = child, end
                        path.append(child)
                        continue
                    if ids[pos:end] == child.key:
                        child.seen_in = (*child.seen_in[1 - _SEEN_LISTS :], base)
                        node, pos = child, end
                        path.append(child)
                        continue
                elif ids[pos:end] == child.key:
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
        page = self.page
        if node._key is None:  # still a slice of its origin: so are both parts
            upper = PageRadixNode(
                None,
                parent,
                next(self._ids),
                node.stamp,
                first_page=node.first_page,
                size=at,
                origin=node.origin,
                origin_start=node.origin_start,
            )
            node.origin_start += at
            node.size -= at
            start = node.origin_start
            node.first_page = tuple(node.origin[start : start + page])  # type: ignore[index]
        else:
            key = node._key
            upper = PageRadixNode(key[:at], parent, next(self._ids), node.stamp)
            upper.first_page = node.first_page
            upper.origin, upper.origin_start = node.origin, node.origin_start
            node._key = key[at:]
            node.size = len(node._key)
            node.first_page = node._key[:page]
            if node.origin is not None:
                node.origin_start += at
        upper.seen_in = node.seen_in  # equal to the whole key, so to both of its parts
        upper.device, upper.host, upper.lock_ref = node.device, node.host, node.lock_ref
        upper.device_children = 1 if node.device else 0
        node.parent = upper
        upper.children[node.first_page] = node
        parent.children[upper.first_page] = upper
        self.node_count += 1
        return upper

    def add_child(
        self, parent: PageRadixNode, ids: TokenSeq, start: int, end: int, stamp: int
    ) -> PageRadixNode:
        """A new node under `parent` for `ids[start:end]` (no tier, no lock: the caller sets
        them). Kept as a slice of `ids`' append-only origin when it has one, else copied."""
        page = self.page
        first_page = ids[start : start + page]
        origin = append_only_origin(ids)
        if origin is not None and end <= origin[1]:
            child = PageRadixNode(
                None,
                parent,
                next(self._ids),
                stamp,
                first_page=first_page,
                size=end - start,
                origin=origin[0],
                origin_start=start,
            )
        else:
            child = PageRadixNode(ids[start:end], parent, next(self._ids), stamp)
            child.first_page = first_page
        parent.children[first_page] = child
        self.node_count += 1
        return child

    def detach(self, node: PageRadixNode) -> list[PageRadixNode]:
        """Remove `node` and its subtree; return the removed nodes (now marked dead)."""
        del self.parent(node).children[node.first_page]
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
            end += node.size
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


def _holds(lists: tuple[list[int], ...], wanted: list[int]) -> bool:
    """Whether `wanted` itself (not an equal list) is one of `lists`."""
    return any(candidate is wanted for candidate in lists)
