"""Pausing Python's cyclic garbage collector around bulk work that allocates a lot and keeps it.

The collector runs whenever enough container objects were allocated, and each run re-traverses
the young survivors (a simulated rollout allocates millions, most of them alive until the end of
a training step; reading a large log keeps every record). Reference counting still frees all
acyclic garbage while the collector is paused; callers collect cycles at points they choose
(the simulator: once per training step), so memory stays bounded.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


@contextmanager
def paused_gc(enabled: bool = True) -> Iterator[None]:
    """Disable automatic collection inside the block (if `enabled`), restoring the previous
    state after it, even on error. Nests: an inner block leaves an outer pause in place."""
    was_enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
