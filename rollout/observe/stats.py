"""Small summary statistics shared by the run summary, metrics and figures."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["mean_or_none"]


def mean_or_none(values: Iterable[float]) -> float | None:
    """The arithmetic mean, or None for no values (a figure that does not exist, not 0)."""
    items = list(values)
    return sum(items) / len(items) if items else None
