"""The `Interval` type: a half-open range ``[start, end)`` of real numbers."""

from __future__ import annotations

from dataclasses import dataclass


class EmptyIntervalError(ValueError):
    """Raised when an interval would contain no points."""


@dataclass(frozen=True, order=True)
class Interval:
    """A half-open interval ``[start, end)``.

    The start point belongs to the interval, the end point does not. Empty
    intervals cannot be represented: ``start`` must be smaller than ``end``.
    Intervals sort by start, then by end.
    """

    start: float
    end: float

    def __post_init__(self) -> None:
        if self.start >= self.end:
            raise EmptyIntervalError(
                f"interval start {self.start!r} must be smaller than its end {self.end!r}"
            )

    @classmethod
    def from_length(cls, start: float, length: float) -> Interval:
        """Build the interval that starts at ``start`` and is ``length`` long."""
        return cls(start, start + length)

    @property
    def length(self) -> float:
        return self.end - self.start

    @property
    def midpoint(self) -> float:
        return (self.start + self.end) / 2

    def contains(self, value: float) -> bool:
        """Return True if ``value`` lies in the interval (the end is excluded)."""
        return self.start <= value < self.end

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, (int, float)):
            return False
        return self.contains(value)

    def covers(self, other: Interval) -> bool:
        """Return True if every point of ``other`` is also in this interval."""
        return self.start <= other.start and other.end <= self.end

    def overlaps(self, other: Interval) -> bool:
        """Return True if the two intervals share at least one point."""
        return self.start < other.end and other.start < self.end

    def touches(self, other: Interval) -> bool:
        """Return True if one interval ends exactly where the other starts."""
        return self.end == other.start or other.end == self.start

    def intersection(self, other: Interval) -> Interval | None:
        """The points in both intervals, or None if they do not overlap."""
        start = max(self.start, other.start)
        end = min(self.end, other.end)
        if start >= end:
            return None
        return Interval(start, end)

    def hull(self, other: Interval) -> Interval:
        """The smallest interval that covers both intervals."""
        return Interval(min(self.start, other.start), max(self.end, other.end))

    def shift(self, offset: float) -> Interval:
        """Move the interval by ``offset``."""
        return Interval(self.start + offset, self.end + offset)

    def scale(self, factor: float, anchor: float | None = None) -> Interval:
        """Stretch the interval by ``factor`` around ``anchor`` (default: the midpoint)."""
        if factor <= 0:
            raise ValueError(f"scale factor must be positive, got {factor!r}")
        if anchor is None:
            anchor = self.midpoint
        return Interval(
            anchor + (self.start - anchor) * factor,
            anchor + (self.end - anchor) * factor,
        )

    def split(self, at: float) -> tuple[Interval, Interval]:
        """Cut the interval in two at ``at``, which must lie strictly inside it."""
        if not self.start < at < self.end:
            raise ValueError(f"split point {at!r} is not strictly inside {self}")
        return Interval(self.start, at), Interval(at, self.end)

    def subtract(self, other: Interval) -> list[Interval]:
        """The parts of this interval that are not in ``other`` (zero, one or two pieces)."""
        if not self.overlaps(other):
            return [self]
        pieces = []
        if self.start < other.start:
            pieces.append(Interval(self.start, other.start))
        if other.end < self.end:
            pieces.append(Interval(other.end, self.end))
        return pieces

    def __str__(self) -> str:
        return f"[{_number(self.start)}, {_number(self.end)})"


def _number(value: float) -> str:
    """Show whole floats without a trailing ``.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
