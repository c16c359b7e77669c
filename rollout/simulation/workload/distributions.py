"""Samplers for the workload's distributions; every draw takes an explicit `random.Random`."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence

from rollout.simulation.workload.config import LengthSpec, ToolKindConfig

__all__ = ["correlated_normal", "derive_seed", "draw_length", "draw_tool", "length_at", "std_draw"]


def derive_seed(seed: int, *parts: object) -> int:
    """A stable 64-bit seed for a named sub-stream (same on every run and platform)."""
    text = "/".join([str(seed), *map(str, parts)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def std_draw(spec: LengthSpec, rng: random.Random) -> float:
    """A standard draw on the log scale: normal, or Student-t when `spec.tail_df` is set."""
    z = rng.gauss(0.0, 1.0)
    if spec.tail_df is None:
        return z
    chi2 = 2.0 * rng.gammavariate(spec.tail_df / 2.0, 1.0)
    return z / math.sqrt(max(chi2, 1e-12) / spec.tail_df)


def length_at(spec: LengthSpec, z: float) -> float:
    """The value at log-scale deviate `z`: `median × exp(sigma × z)`, clipped."""
    exponent = min(spec.sigma * z, 700.0)  # exp overflows past ~709
    return min(spec.max, max(spec.min, spec.median * math.exp(exponent)))


def draw_length(
    spec: LengthSpec, rng: random.Random, shift_z: float = 0.0, share: float = 0.0
) -> float:
    """One value; `shift_z` is a shared deviate carrying `share` of the log-variance."""
    z = math.sqrt(share) * shift_z + math.sqrt(1.0 - share) * std_draw(spec, rng)
    return length_at(spec, z)


def correlated_normal(shared: float, rng: random.Random, correlation: float) -> float:
    """A standard normal; two draws made with the same `shared` deviate correlate `correlation`."""
    return math.sqrt(correlation) * shared + math.sqrt(1.0 - correlation) * rng.gauss(0.0, 1.0)


def draw_tool(tools: Sequence[ToolKindConfig], rng: random.Random) -> ToolKindConfig:
    """A tool kind, by weight."""
    total = sum(tool.weight for tool in tools)
    pick = rng.random() * total
    for tool in tools:
        pick -= tool.weight
        if pick < 0:
            return tool
    return tools[-1]
