"""Half-open numeric intervals and interval sets."""

from spans.interval import EmptyIntervalError, Interval
from spans.intervalset import IntervalSet, merge
from spans.notation import format_interval, parse_interval, parse_intervals

__all__ = [
    "EmptyIntervalError",
    "Interval",
    "IntervalSet",
    "format_interval",
    "merge",
    "parse_interval",
    "parse_intervals",
]

__version__ = "1.2.0"
