"""The scheduler's incremental indexes, so that no event costs time in the size of the backlog.

* `SeqQueue`: items by a unique, mostly increasing sequence number, iterated in order; the
  iteration survives the removal of what it already yielded (dispatch starts samples while it
  walks the queue).
* `VictimHeap`: preemption candidates by a key that changes rarely (tokens this turn, start
  time); what ties on it is ordered by the caller at query time (group rank, which every
  priority recomputation may shift for all groups at once, is read only then).

Pure data structures: no clock, no I/O.
"""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["SeqQueue", "VictimHeap"]

_T = TypeVar("_T")

VictimPrimary = tuple[int, float]
"""The part of a victim's key that changes only with its own progress."""

# A heap holding this many more items than live ones is rebuilt (lazy deletion leaves garbage).
_COMPACT_SLACK = 64


class SeqQueue(Generic[_T]):
    """Items in the order of their sequence numbers (each unique)."""

    __slots__ = ("_by_seq", "_seqs")

    def __init__(self) -> None:
        self._seqs: list[int] = []
        self._by_seq: dict[int, _T] = {}

    def __len__(self) -> int:
        return len(self._seqs)

    def add(self, seq: int, item: _T) -> None:
        if seq in self._by_seq:
            raise ValueError(f"sequence number {seq} is already queued; each must be unique")
        if not self._seqs or seq > self._seqs[-1]:
            self._seqs.append(seq)  # the common case: a fresh arrival
        else:
            insort(self._seqs, seq)  # a sample moving between levels keeps its place
        self._by_seq[seq] = item

    def remove(self, seq: int) -> None:
        del self._by_seq[seq]
        del self._seqs[bisect_left(self._seqs, seq)]

    def items(self) -> Iterator[tuple[int, _T]]:
        """(seq, item) in order; items removed meanwhile are skipped, none is yielded twice."""
        seqs, by_seq, last = self._seqs, self._by_seq, -1
        while True:
            index = bisect_right(seqs, last)
            if index == len(seqs):
                return
            last = seqs[index]
            yield last, by_seq[last]


class VictimHeap(Generic[_T]):
    """Running low-priority samples of one engine, smallest primary key first (lazy deletion)."""

    __slots__ = ("_heap", "_live", "_tokens")

    def __init__(self) -> None:
        self._heap: list[tuple[VictimPrimary, str, int]] = []
        self._live: dict[str, tuple[int, _T]] = {}  # sample id -> (token, item)
        self._tokens = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def add(self, sample_id: str, primary: VictimPrimary, item: _T) -> None:
        """Add or re-key `sample_id`."""
        token = next(self._tokens)
        self._live[sample_id] = (token, item)
        heapq.heappush(self._heap, (primary, sample_id, token))
        if len(self._heap) > 2 * len(self._live) + _COMPACT_SLACK:
            self._heap = [node for node in self._heap if self._valid(node)]
            heapq.heapify(self._heap)

    def discard(self, sample_id: str) -> None:
        self._live.pop(sample_id, None)

    def min_primary(self) -> VictimPrimary | None:
        heap = self._heap
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def tied(self, primary: VictimPrimary) -> list[_T]:
        """Every live item whose primary key is `primary` (the smallest; call min_primary first)."""
        heap, popped, tied = self._heap, [], []
        while heap and heap[0][0] == primary:
            node = heapq.heappop(heap)
            if self._valid(node):
                popped.append(node)
                tied.append(self._live[node[1]][1])
        for node in popped:
            heapq.heappush(heap, node)
        return tied

    def _valid(self, node: tuple[VictimPrimary, str, int]) -> bool:
        live = self._live.get(node[1])
        return live is not None and live[0] == node[2]
