"""`UnicodeText`: a text space for agent observations and actions.

Gymnasium's `spaces.Text` rejects any character outside its charset, but model output and tool
output contain arbitrary Unicode (code, box drawing, emoji). This space accepts every `str` up
to `max_length` characters.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

__all__ = ["UnicodeText"]

_SAMPLE_ALPHABET = string.ascii_letters + string.digits + " _-./"


class UnicodeText(Space[str]):
    """Any Unicode string of at most `max_length` characters.

    >>> space = UnicodeText(max_length=10)
    >>> space.contains("naïve ✓")
    True
    >>> space.contains("x" * 11)
    False
    """

    def __init__(self, max_length: int, *, seed: int | np.random.Generator | None = None) -> None:
        if not isinstance(max_length, int) or isinstance(max_length, bool):
            raise TypeError(f"max_length must be an int, actual type: {type(max_length)}")
        if max_length < 1:
            raise ValueError(f"max_length must be at least 1, actual value: {max_length}")
        self.max_length = max_length
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A short random ASCII string (samples are for smoke tests, not for exploration)."""
        length = int(self.np_random.integers(1, min(self.max_length, 32) + 1))
        indices = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=length)
        return "".join(_SAMPLE_ALPHABET[i] for i in indices)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash(("UnicodeText", self.max_length))
