"""Radix tree over page-aligned token ids: nodes, matching, splitting, growing and unlinking.

Structure only. Tier residency, references and locks are fields on the node, but the rules that
keep them consistent live in `kvcache.cache.TieredCache`, the tree's only writer. Every edge key
is a non-empty whole number of pages, and siblings differ in their first page, whose page key
(`kvcache.page_keys`: one integer per page standing for the whole prefix) is the child's key in
its parent's `children` map. Lookups compare page keys, never tokens: a whole edge matches when
its last page key does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kvcache.page_keys import ROOT_KEY, TokenSequence, continue_page_keys, page_keys

__all__ = ["PathStep", "RadixTree", "TreeNode", "diverging_paths"]

Tokens = tuple[int, ...]


class TreeNode:
    """One edge of the radix tree and the KV of its tokens.

    `lock_ref`, `high_ref` and `low_ref` count running requests, live high-priority sessions and
    live low-priority sessions whose context runs through the node (root-to-leaf coverage, so a
    node's counts are never below any child's). `on_device`/`on_host` say where its KV is.
    `page_keys` holds the page key of each page of `key`; `end` is the node's depth in tokens
    (where its last token sits in every sequence through it; a split never changes it).
    """

    __slots__ = (
        "alive",
        "children",
        "device_children",
        "device_entry_class",
        "device_seq",
        "end",
        "high_ref",
        "host_entry_class",
        "host_pin",
        "host_seq",
        "key",
        "last_access_s",
        "leaf_sessions",
        "lock_ref",
        "low_ref",
        "node_id",
        "on_device",
        "on_host",
        "page_keys",
        "parent",
        "ready_at_s",
        "ref_class",
        "tokens",
    )

    def __init__(
        self,
        node_id: int,
        key: Tokens,
        parent: TreeNode | None,
        page_keys: tuple[int, ...] = (),
    ) -> None:
        self.node_id = node_id
        self.key = key
        self.tokens = len(key)  # tokens (and KV slots) on this edge; kept with `key`
        self.page_keys = page_keys
        self.end: int = self.tokens + (parent.end if parent is not None else 0)
        self.parent = parent
        self.children: dict[int, TreeNode] = {}  # by the child's first page key
        self.alive = True
        self.on_device = False
        self.on_host = False
        self.device_children = 0  # children with KV on device
        self.lock_ref = 0
        self.high_ref = 0
        self.low_ref = 0
        # `class_index(high_ref, low_ref)`, kept by the cache whenever it changes a ref: the
        # counters and heaps read a node's class millions of times, its refs change far less.
        self.ref_class = 0
        self.host_pin = 0  # >0 while a load reads the host copy; it may not be discarded
        self.last_access_s = 0.0
        self.ready_at_s = 0.0  # an in-flight copy into this node's device KV lands then
        self.device_seq = -1  # sequence number of the node's live device-heap entry
        self.host_seq = -1  # sequence number of the node's live host-heap entry
        self.device_entry_class = -1  # eviction class that entry was pushed with
        self.host_entry_class = -1
        self.leaf_sessions: set[str] = set()  # sessions whose context ends at this node

    @property
    def is_root(self) -> bool:
        return self.parent is None and self.alive

    @property
    def last_page_key(self) -> int:
        """The key of the node's last page: it stands for the whole root..node prefix."""
        return self.page_keys[-1] if self.page_keys else ROOT_KEY

    def __repr__(self) -> str:
        tiers = ("D" if self.on_device else "") + ("H" if self.on_host else "")
        return (
            f"TreeNode(id={self.node_id}, tokens={self.tokens}, tiers={tiers or '-'}, "
            f"lock={self.lock_ref}, high={self.high_ref}, low={self.low_ref})"
        )


class PathStep:
    """A node on a matched path and how many of its tokens matched (the last may be partial)."""

    __slots__ = ("matched_tokens", "node")

    def __init__(self, node: TreeNode, matched_tokens: int) -> None:
        self.node = node
        self.matched_tokens = matched_tokens


class RadixTree:
    """Page-aligned radix tree. The root has an empty key and holds no KV."""

    def __init__(self, page_size: int) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        self.page_size = page_size
        self.root = TreeNode(0, (), None)
        self._next_id = 1
        self.node_count = 0  # excluding the root

    def depth_tokens(self, node: TreeNode) -> int:
        """Tokens on the path from the root to `node` (its depth in tokens)."""
        return node.end

    def aligned_length(self, n_tokens: int) -> int:
        """Tokens in the whole pages of an `n_tokens`-long sequence."""
        return n_tokens - n_tokens % self.page_size

    def page_keys(self, tokens: TokenSequence, end: int | None = None) -> Sequence[int]:
        """The page keys of the whole pages of `tokens[:end]` (carried ones if it has them)."""
        limit = len(tokens) if end is None else min(end, len(tokens))
        return page_keys(tokens, self.page_size, limit // self.page_size)

    def walk(
        self,
        tokens: TokenSequence,
        end: int | None = None,
        *,
        start: TreeNode | None = None,
        offset: int = 0,
    ) -> list[PathStep]:
        """The nodes along the longest cached prefix of the whole pages of `tokens[:end]`, root
        excluded. (`end` spares the caller a copy of a long sequence just to cut its tail.)

        With `start`, the walk begins below that node, whose path from the root the caller
        knows to hold `tokens[:offset]`; only the nodes below it are returned.

        The hot loop of every lookup: one dict lookup and one key comparison per edge.
        """
        page = self.page_size
        limit = len(tokens) if end is None else min(end, len(tokens))
        return self.walk_keys(self.page_keys(tokens, limit), limit // page, start, offset // page)

    def walk_keys(
        self, keys: Sequence[int], n_pages: int, start: TreeNode | None, first_page: int
    ) -> list[PathStep]:
        """`walk` over the page keys `keys[:n_pages]`, from below `start` at `first_page`."""
        steps: list[PathStep] = []
        node = self.root if start is None else start
        page = self.page_size
        position = first_page
        while position < n_pages:
            child = node.children.get(keys[position])
            if child is None:
                break
            edge = child.page_keys
            last = position + len(edge) - 1
            if last < n_pages and keys[last] == edge[-1]:
                steps.append(PathStep(child, child.tokens))
                position = last + 1
                node = child
                continue
            matched = 1  # the first page matched: it is the child's key in the parent map
            bound = min(len(edge), n_pages - position)
            while matched < bound and keys[position + matched] == edge[matched]:
                matched += 1
            steps.append(PathStep(child, matched * page))
            break
        return steps

    def split(self, node: TreeNode, at_tokens: int) -> TreeNode:
        """Split `node` after `at_tokens` tokens; return the new upper node.

        `node` keeps its identity as the lower part, so lock receipts and session leaves that
        point at it stay valid. The upper node inherits residency, references and locks, which
        is exact: everything that ran through `node` runs through its upper part.
        """
        if at_tokens <= 0 or at_tokens >= node.tokens or at_tokens % self.page_size:
            raise ValueError(
                f"cannot split a {node.tokens}-token node at {at_tokens}: the split point must "
                f"be a whole number of pages ({self.page_size}) strictly inside the node"
            )
        parent = node.parent
        if parent is None:
            raise ValueError("the root cannot be split")
        at_page = at_tokens // self.page_size
        upper = TreeNode(self._take_id(), node.key[:at_tokens], parent, node.page_keys[:at_page])
        upper.on_device = node.on_device
        upper.on_host = node.on_host
        upper.lock_ref = node.lock_ref
        upper.high_ref = node.high_ref
        upper.low_ref = node.low_ref
        upper.ref_class = node.ref_class
        upper.last_access_s = node.last_access_s
        upper.ready_at_s = node.ready_at_s
        upper.host_pin = node.host_pin
        upper.device_children = 1 if node.on_device else 0
        parent.children[upper.page_keys[0]] = upper
        node.key = node.key[at_tokens:]
        node.tokens = len(node.key)
        node.page_keys = node.page_keys[at_page:]
        node.parent = upper
        upper.children[node.page_keys[0]] = node
        self.node_count += 1
        return upper

    def add_child(
        self, parent: TreeNode, key: Sequence[int], keys: Sequence[int] | None = None
    ) -> TreeNode:
        """Append a new node (no KV yet) under `parent`; its first page must be new there.

        `keys`: the page keys of `key`'s pages continuing `parent`'s chain, if the caller has
        them (they are computed otherwise).
        """
        page = self.page_size
        if not key or len(key) % page:
            raise ValueError(
                f"a node key must be a non-empty whole number of pages ({page}), "
                f"got {len(key)} tokens"
            )
        if keys is None:
            keys = continue_page_keys(key, page, parent.last_page_key)
        if len(keys) != len(key) // page:
            raise ValueError(f"{len(keys)} page keys for {len(key) // page} pages")
        if keys[0] in parent.children:
            raise ValueError("a sibling already starts with this page; walk and split instead")
        child = TreeNode(self._take_id(), tuple(key), parent, tuple(keys))
        parent.children[keys[0]] = child
        self.node_count += 1
        return child

    def unlink(self, node: TreeNode) -> None:
        """Remove a childless node from its parent and mark it dead."""
        if node.children:
            raise ValueError(f"{node!r} still has children; unlink them first (leaf-up)")
        parent = node.parent
        if parent is None:
            raise ValueError("the root cannot be unlinked")
        del parent.children[node.page_keys[0]]
        node.alive = False
        node.parent = None
        self.node_count -= 1

    def iter_nodes(self) -> Iterator[TreeNode]:
        """Every node except the root, parents before children."""
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def path_tokens(self, node: TreeNode) -> Tokens:
        """The token ids from the root to the end of `node`."""
        parts: list[Tokens] = []
        current: TreeNode | None = node
        while current is not None and current.parent is not None:
            parts.append(current.key)
            current = current.parent
        return tuple(token for part in reversed(parts) for token in part)

    def _take_id(self) -> int:
        node_id = self._next_id
        self._next_id += 1
        return node_id


def diverging_paths(old: TreeNode, new: TreeNode) -> tuple[list[TreeNode], list[TreeNode]]:
    """The nodes on root..`old` but not root..`new`, and on root..`new` but not root..`old`.

    Both bottom-up, root excluded. Moving a lock or a session ref from `old` to `new` only
    changes these nodes: the shared ancestors keep their counts. A session's next context
    usually extends its last one, so this is a few nodes where a full path is dozens.
    """
    on_old: set[TreeNode] = set()
    node: TreeNode | None = old
    while node is not None:
        on_old.add(node)
        node = node.parent
    new_only: list[TreeNode] = []
    node = new
    while node is not None and node not in on_old:
        new_only.append(node)
        node = node.parent
    old_only: list[TreeNode] = []
    stop = node
    node = old
    while node is not stop and node is not None:
        old_only.append(node)
        node = node.parent
    return old_only, new_only
