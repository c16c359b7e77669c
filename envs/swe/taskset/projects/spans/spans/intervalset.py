"""`IntervalSet`: a union of intervals kept as sorted, disjoint pieces."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from spans.interval import Interval


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sort intervals and coalesce the ones that overlap or touch.

    ``[1, 3)`` and ``[3, 5)`` touch, so they merge into ``[1, 5)``.
    """
    merged: list[Interval] = []
    for current in sorted(intervals):
        if merged and current.start <= merged[-1].end:
            last = merged.pop()
            merged.append(Interval(last.start, max(last.end, current.end)))
        else:
            merged.append(current)
    return merged


class IntervalSet:
    """A set of points on the real line, stored as sorted disjoint intervals."""

    def __init__(self, intervals: Iterable[Interval] = ()) -> None:
        self._pieces = merge(intervals)

    def add(self, interval: Interval) -> None:
        """Add every point of ``interval`` to the set."""
        self._pieces = merge([*self._pieces, interval])

    def remove(self, interval: Interval) -> None:
        """Remove every point of ``interval`` from the set."""
        remaining: list[Interval] = []
        for piece in self._pieces:
            remaining.extend(piece.subtract(interval))
        self._pieces = remaining

    def __contains__(self, value: float) -> bool:
        starts = [piece.start for piece in self._pieces]
        index = bisect.bisect_right(starts, value) - 1
        return index >= 0 and self._pieces[index].contains(value)

    def __iter__(self) -> Iterator[Interval]:
        return iter(self._pieces)

    def __len__(self) -> int:
        return len(self._pieces)

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IntervalSet):
            return NotImplemented
        return self._pieces == other._pieces

    def __repr__(self) -> str:
        return f"IntervalSet({self._pieces!r})"

    def __str__(self) -> str:
        return "{" + ", ".join(str(piece) for piece in self._pieces) + "}"

    def total_length(self) -> float:
        """The summed length of all pieces."""
        return sum(piece.length for piece in self._pieces)

    def span(self) -> Interval | None:
        """The smallest interval covering the whole set, or None if the set is empty."""
        if not self._pieces:
            return None
        return Interval(self._pieces[0].start, self._pieces[-1].end)

    def gaps(self, within: Interval | None = None) -> list[Interval]:
        """The intervals not in the set, between its pieces or inside ``within``."""
        bounds = within if within is not None else self.span()
        if bounds is None:
            return []
        free = [bounds]
        for piece in self._pieces:
            free = [part for gap in free for part in gap.subtract(piece)]
        return free

    def union(self, other: IntervalSet) -> IntervalSet:
        return IntervalSet([*self._pieces, *other._pieces])

    def intersection(self, other: IntervalSet) -> IntervalSet:
        common = []
        for mine in self._pieces:
            for theirs in other._pieces:
                overlap = mine.intersection(theirs)
                if overlap is not None:
                    common.append(overlap)
        return IntervalSet(common)
