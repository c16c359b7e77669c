"""`check_cache`: recompute every invariant of a `TieredCache` from scratch and report violations.

Shipped with the cache (like Gymnasium's env checker) so tests, the simulator's debug mode and a
future SGLang plugin can all assert the same rules. O(nodes × depth); not for hot paths.
"""

from __future__ import annotations

from collections import Counter

from kvcache.cache import TieredCache
from kvcache.errors import InvariantError
from kvcache.eviction_order import EvictionClass, eviction_class
from kvcache.page_keys import continue_page_keys
from kvcache.tree import TreeNode
from kvcache.types import Priority

__all__ = ["cache_problems", "check_cache"]


def check_cache(cache: TieredCache) -> None:
    """Raise `InvariantError` naming every broken invariant; return None if all hold."""
    problems = cache_problems(cache)
    if problems:
        shown = "; ".join(problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise InvariantError(f"KV cache invariants broken: {shown}{more}")


def cache_problems(cache: TieredCache) -> list[str]:
    """Every broken invariant, as readable sentences (empty when the cache is consistent)."""
    problems: list[str] = []
    tree = cache.tree
    page = tree.page_size
    expected_locks: Counter[int] = Counter()
    for node in cache.locked_nodes():
        _add_path(expected_locks, node)
    expected_high: Counter[int] = Counter()
    expected_low: Counter[int] = Counter()
    for session_id, (leaf, priority) in cache.session_refs().items():
        if not leaf.alive:
            problems.append(f"session {session_id!r} references a dead node")
        if session_id not in leaf.leaf_sessions:
            problems.append(f"session {session_id!r} is missing from its leaf's session set")
        _add_path(expected_high if priority is Priority.HIGH else expected_low, leaf)

    device_tokens = host_tokens = nodes = 0
    evictable = [0] * len(EvictionClass)
    reclaimable = [0] * len(EvictionClass)
    backups = [0] * len(EvictionClass)
    for node in tree.iter_nodes():
        nodes += 1
        problems.extend(_node_problems(node, page))
        if node.lock_ref != expected_locks[node.node_id]:
            problems.append(
                f"{node!r}: lock_ref {node.lock_ref} but "
                f"{expected_locks[node.node_id]} locks cover it"
            )
        if (
            node.high_ref != expected_high[node.node_id]
            or node.low_ref != expected_low[node.node_id]
        ):
            problems.append(
                f"{node!r}: refs high={node.high_ref} low={node.low_ref} but live sessions cover "
                f"it high={expected_high[node.node_id]} low={expected_low[node.node_id]}"
            )
        node_class = eviction_class(node.high_ref, node.low_ref)
        if node.ref_class != node_class:
            problems.append(f"{node!r}: its kept class {node.ref_class} is not {int(node_class)}")
        if node.on_device:
            device_tokens += node.tokens
            if node.lock_ref == 0:
                evictable[node_class] += node.tokens
        if node.on_host:
            host_tokens += node.tokens
            if node.host_pin == 0:
                reclaimable[node_class] += node.tokens
                if node.on_device:
                    backups[node_class] += node.tokens

    if nodes != tree.node_count:
        problems.append(f"tree counts {tree.node_count} nodes but {nodes} are reachable")
    if device_tokens != cache.device_cached_tokens:
        problems.append(
            f"device holds {device_tokens} tokens but the cache counts {cache.device_cached_tokens}"
        )
    if host_tokens != cache.host_cached_tokens:
        problems.append(
            f"host holds {host_tokens} tokens but the cache counts {cache.host_cached_tokens}"
        )
    if cache.reserved_tokens < 0:
        problems.append(f"reserved tokens are negative ({cache.reserved_tokens})")
    if cache.device_cached_tokens + cache.reserved_tokens > cache.device_capacity_tokens:
        problems.append(
            f"device over capacity: {cache.device_cached_tokens} cached + "
            f"{cache.reserved_tokens} reserved > {cache.device_capacity_tokens}"
        )
    if cache.host_cached_tokens > cache.host_capacity_tokens:
        problems.append(
            f"host over capacity: {cache.host_cached_tokens} > {cache.host_capacity_tokens}"
        )
    for node in cache.uncovered_candidates():
        problems.append(f"{node!r}: an eviction candidate with no heap entry to reach it by")
    counted_evictable, counted_reclaimable = cache.counters()
    if tuple(evictable) != counted_evictable:
        problems.append(f"evictable by class is {evictable} but counted {counted_evictable}")
    if tuple(reclaimable) != counted_reclaimable:
        problems.append(
            f"host reclaimable by class is {reclaimable} but counted {counted_reclaimable}"
        )
    if tuple(backups) != cache.backup_counters():
        problems.append(
            f"host backups by class are {backups} but counted {cache.backup_counters()}"
        )
    return problems


def _node_problems(node: TreeNode, page: int) -> list[str]:
    problems: list[str] = []
    parent = node.parent
    if parent is None or not node.alive:
        return [f"{node!r} is reachable but dead or parentless"]
    if not node.key or len(node.key) % page:
        problems.append(f"{node!r}: key of {len(node.key)} tokens is not whole pages of {page}")
    if node.tokens != len(node.key):
        problems.append(f"{node!r}: counts {node.tokens} tokens but its key holds {len(node.key)}")
    if tuple(node.page_keys) != tuple(continue_page_keys(node.key, page, parent.last_page_key)):
        problems.append(f"{node!r}: its page keys do not chain its tokens onto its parent's")
    elif parent.children.get(node.page_keys[0]) is not node:
        problems.append(f"{node!r}: not filed under its first page in its parent")
    if node.end != parent.end + node.tokens:
        problems.append(f"{node!r}: ends at token {node.end}, not {parent.end + node.tokens}")
    if not (node.on_device or node.on_host):
        problems.append(f"{node!r}: holds KV on no tier")
    if node.on_device and parent.parent is not None and not parent.on_device:
        problems.append(f"{node!r}: on device below a parent that is not (prefix not closed)")
    device_children = sum(1 for child in node.children.values() if child.on_device)
    if device_children != node.device_children:
        problems.append(
            f"{node!r}: device_children {node.device_children} but {device_children} are on device"
        )
    if node.lock_ref < 0 or node.high_ref < 0 or node.low_ref < 0:
        problems.append(f"{node!r}: a count is negative")
    if node.lock_ref > 0 and not node.on_device:
        problems.append(f"{node!r}: locked but not on device")
    if node.host_pin:
        problems.append(f"{node!r}: host pin left behind ({node.host_pin})")
    for child in node.children.values():
        if child.parent is not node:
            problems.append(f"{child!r}: parent link does not point back to {node!r}")
    return problems


def _add_path(counter: Counter[int], node: TreeNode) -> None:
    current: TreeNode | None = node
    while current is not None and current.parent is not None:
        counter[current.node_id] += 1
        current = current.parent
