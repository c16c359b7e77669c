"""Where a simulated sample's env goes: the env node with the fewest live envs.

Pure: loads in, a node index out (no clock, no asyncio), so the rule is tested without a loop.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["least_loaded_node"]


def least_loaded_node(live_envs: Sequence[int]) -> int:
    """The index of the node with the fewest live envs; ties go to the lowest index.

    The tie rule keeps runs repeatable (same inputs, same placement) and fills an idle fleet
    in node order. Raises ValueError on an empty fleet or a negative load (a broken count).
    """
    if not live_envs:
        raise ValueError("an env fleet needs at least one node to place a sample on")
    if min(live_envs) < 0:
        raise ValueError(f"live env counts cannot be negative, got {list(live_envs)}")
    return min(range(len(live_envs)), key=lambda index: (live_envs[index], index))
