"""The eviction order as pure functions: which node goes first, who may evict it, and how.

The tree owns the heap walk (leaf-up); these functions only rank and decide, so they are tested
without a tree (STYLE.md §5, after SGLang's `EvictionStrategy.get_priority`). Order:
unreferenced nodes, then nodes referenced only by low-priority sessions, then nodes referenced by
a high-priority session; least recently used first within a class. Because a session references
its whole root-to-leaf path, a node's class is never lower than any descendant's, so the leaf-up
walk in key order never has to evict a higher class to reach a lower one.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

from kvcache.types import Priority

__all__ = [
    "EvictionAction",
    "EvictionClass",
    "EvictionKey",
    "eviction_action",
    "eviction_class",
    "eviction_key",
    "host_reclaim_limit",
    "max_evictable_class",
    "should_offload",
]

EvictionKey = tuple[int, float]
"""`(eviction class, last access time in s)`; the smallest key is evicted first."""


class EvictionClass(IntEnum):
    """How protected a node is, from its references. Lower classes are evicted first."""

    UNREFERENCED = 0  # no live session's context runs through the node
    LOW_REF = 1  # only low-priority sessions need it
    HIGH_REF = 2  # a high-priority (critical) session needs it


class EvictionAction(StrEnum):
    """What evicting a node from device does to its KV."""

    DEMOTE = "demote"  # a host copy exists: free the device copy, nothing crosses the link
    OFFLOAD = "offload"  # copy device→host, then free the device copy
    DROP = "drop"  # discard the KV (and any host-only KV below it, now unreachable)


def eviction_class(high_ref: int, low_ref: int) -> EvictionClass:
    """Classify a node by the live sessions whose context runs through it."""
    return _CLASS_BY_INDEX[class_index(high_ref, low_ref)]


def class_index(high_ref: int, low_ref: int) -> int:
    """`eviction_class` as a plain int: the cache's hot paths index counters and heaps with it
    (an enum member costs a conversion on every use)."""
    if high_ref > 0:
        return _HIGH_REF
    if low_ref > 0:
        return _LOW_REF
    return _UNREFERENCED


_CLASS_BY_INDEX = tuple(sorted(EvictionClass))
_HIGH_REF = int(EvictionClass.HIGH_REF)
_LOW_REF = int(EvictionClass.LOW_REF)
_UNREFERENCED = int(EvictionClass.UNREFERENCED)


def eviction_key(high_ref: int, low_ref: int, last_access_s: float) -> EvictionKey:
    """Sort key of a node for eviction: class first, then least recently used."""
    return (int(eviction_class(high_ref, low_ref)), last_access_s)


def max_evictable_class(requester: Priority) -> EvictionClass:
    """The highest class a requester may evict: only a high-priority request evicts high refs."""
    return EvictionClass.HIGH_REF if requester is Priority.HIGH else EvictionClass.LOW_REF


def should_offload(node_class: EvictionClass, offload_min_class: EvictionClass | None) -> bool:
    """Whether eviction should keep the node's KV on host (policy rule; host room is separate)."""
    return offload_min_class is not None and node_class >= offload_min_class


def host_reclaim_limit(node_class: EvictionClass, strict: bool) -> EvictionClass | None:
    """Highest class of host KV that may be discarded to make host room for a node of `node_class`.

    Strict (priority policy): only strictly less protected KV, so offloading one session never
    throws away the offloaded KV of another session of the same priority. Not strict (LRU
    write-back): the same class, least recently used first. None means "no host KV may go".
    """
    if not strict:
        return node_class
    if node_class == EvictionClass.UNREFERENCED:
        return None
    return EvictionClass(node_class - 1)


def eviction_action(*, on_host: bool, offload: bool, host_has_room: bool) -> EvictionAction:
    """Decide what evicting a device node does, given its host copy and the host's room."""
    if on_host:
        return EvictionAction.DEMOTE
    if offload and host_has_room:
        return EvictionAction.OFFLOAD
    return EvictionAction.DROP
