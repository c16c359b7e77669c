"""Run directories: `<parent>/<YYYYmmdd-HHMMSS>[-N]`, created atomically so that two runs
started in the same second never share one (and never write each other's sample ids)."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["new_run_dir"]


def new_run_dir(parent: Path, *, now: float | None = None) -> Path:
    """Create and return a fresh, empty run directory under `parent`."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    parent.mkdir(parents=True, exist_ok=True)
    for index in range(1, 10_000):
        candidate = parent / (stamp if index == 1 else f"{stamp}-{index}")
        try:
            candidate.mkdir()  # atomic: exactly one of two racing runs gets each name
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{parent} already holds 10,000 run directories named {stamp}*")
