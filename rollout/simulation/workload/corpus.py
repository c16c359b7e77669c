"""`TokenCorpus`: a pre-drawn pool of token ids and logprobs that synthetic content is sliced from.

Slicing a shared tuple costs one C-level copy per turn instead of a Python object per token.
The ids come from a small set of distinct values (int objects shared by every context), which
keeps reference counting cache-friendly when long contexts are sliced and joined: content only
has to be deterministic and distinct between samples (for the radix cache), not meaningful.
"""

from __future__ import annotations

import operator
from typing import TypeVar

import numpy as np

__all__ = ["TokenCorpus"]

T = TypeVar("T")

# Sampled-token logprobs: -Gamma(shape, scale) has mean -0.4 nats with most mass near 0 and a tail
# of uncertain tokens, the usual look of temperature-1 samples from a trained policy [A].
_LOGPROB_SHAPE = 0.5
_LOGPROB_SCALE = 0.8
_LOGPROB_CEILING = -1e-6  # a sampled token never has probability exactly 1


class TokenCorpus:
    """`size` token ids, drawn from `distinct_ids` values in [0, vocab_size), with logprobs.

    No id in `reserved_ids` (stop tokens) ever appears. Deterministic for `seed`.
    """

    def __init__(
        self,
        seed: int,
        vocab_size: int,
        size: int,
        reserved_ids: tuple[int, ...] = (),
        distinct_ids: int = 4096,
    ) -> None:
        reserved = sorted(set(reserved_ids))
        usable = vocab_size - len(reserved)
        if size <= 0 or usable <= 0 or distinct_ids <= 0:
            raise ValueError(
                f"need size > 0, distinct_ids > 0 and a vocabulary larger than the reserved ids; "
                f"got size={size}, distinct_ids={distinct_ids}, vocab_size={vocab_size}, "
                f"reserved={reserved_ids}"
            )
        generator = np.random.Generator(np.random.PCG64(seed))
        allowed = np.setdiff1d(np.arange(vocab_size), np.asarray(reserved, dtype=np.int64))
        values = generator.choice(allowed, size=min(distinct_ids, usable), replace=False)
        ids = values[generator.integers(0, len(values), size=size)]
        table = tuple(range(vocab_size))  # one int object per id, shared by every slice
        self._ids: tuple[int, ...] = operator.itemgetter(*ids.tolist())(table)
        logprobs = np.minimum(
            -generator.gamma(_LOGPROB_SHAPE, _LOGPROB_SCALE, size=size), _LOGPROB_CEILING
        )
        self._logprobs: tuple[float, ...] = tuple(logprobs.tolist())
        self.size = size

    def ids(self, offset: int, count: int) -> tuple[int, ...]:
        """`count` ids starting at `offset` (wrapping around the pool)."""
        return _wrapped(self._ids, offset % self.size, count)

    def logprobs(self, offset: int, count: int) -> tuple[float, ...]:
        """The logprobs that go with `ids(offset, count)`."""
        return _wrapped(self._logprobs, offset % self.size, count)


def _wrapped(pool: tuple[T, ...], start: int, count: int) -> tuple[T, ...]:
    end = start + count
    if end <= len(pool):
        return pool[start:end]
    parts = [pool[start:]]
    remaining = end - len(pool)
    while remaining > 0:
        parts.append(pool[:remaining])
        remaining -= len(pool)
    return tuple(item for part in parts for item in part)
