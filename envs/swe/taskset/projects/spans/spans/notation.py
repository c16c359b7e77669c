"""Read and write intervals in mathematical notation, e.g. ``[1.5, 4)``."""

from __future__ import annotations

import re

from spans.interval import Interval

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_INTERVAL = re.compile(rf"^\s*\[\s*(?P<start>{_NUMBER})\s*,\s*(?P<end>{_NUMBER})\s*\)\s*$")
_SEPARATOR = re.compile(r"\s*(?:;|\bU\b|∪)\s*")


def _to_number(text: str) -> float:
    value = float(text)
    return int(value) if value.is_integer() and re.fullmatch(r"[-+]?\d+", text) else value


def parse_interval(text: str) -> Interval:
    """Parse ``"[start, end)"``; integers stay integers.

    Raises ValueError if the text is not a half-open interval.
    """
    match = _INTERVAL.match(text)
    if match is None:
        raise ValueError(f"not a half-open interval like '[1, 2)': {text!r}")
    return Interval(_to_number(match.group("start")), _to_number(match.group("end")))


def parse_intervals(text: str) -> list[Interval]:
    """Parse several intervals separated by ``;``, ``U`` or ``∪``."""
    if not text.strip():
        return []
    return [parse_interval(part) for part in _SEPARATOR.split(text.strip())]


def format_interval(interval: Interval, precision: int | None = None) -> str:
    """Write an interval in notation; ``precision`` rounds both ends to that many decimals."""
    if precision is None:
        return str(interval)
    return f"[{interval.start:.{precision}f}, {interval.end:.{precision}f})"
