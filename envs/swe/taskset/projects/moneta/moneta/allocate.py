"""Split an amount into parts without creating or losing a minor unit."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from moneta.money import Money


def allocate(money: Money, ratios: Sequence[int | Decimal]) -> list[Money]:
    """Split ``money`` in proportion to ``ratios``.

    The parts always add up to ``money`` exactly. Each part first gets its
    share rounded down; the minor units left over go one at a time to the
    parts whose exact share lost the most in rounding, earlier parts first
    when two lost the same. Negative amounts are split like their absolute
    value, and every part is negative.
    """
    if not ratios:
        raise ValueError("need at least one ratio")
    if any(ratio < 0 for ratio in ratios):
        raise ValueError(f"ratios must not be negative: {list(ratios)}")
    total_ratio = sum(ratios)
    if total_ratio == 0:
        raise ValueError("at least one ratio must be positive")
    sign = -1 if money.minor < 0 else 1
    units = abs(money.minor)
    shares = [Decimal(units) * Decimal(ratio) / Decimal(total_ratio) for ratio in ratios]
    parts = [int(share) for share in shares]
    leftover = units - sum(parts)
    by_loss = sorted(range(len(parts)), key=lambda index: (parts[index] - shares[index], index))
    for index in by_loss[:leftover]:
        parts[index] += 1
    return [Money(sign * part, money.currency) for part in parts]


def split_evenly(money: Money, count: int) -> list[Money]:
    """Split ``money`` into ``count`` parts that differ by at most one minor unit."""
    if count <= 0:
        raise ValueError(f"count must be positive, got {count}")
    return allocate(money, [1] * count)
