"""Page keys: one integer per whole page of a token sequence that stands for the whole prefix.

Key ``k_i = hash((k_{i-1}, page_i))`` chains the pages (vLLM's block hashes work the same
way), so two sequences whose keys agree at page i agree on every token up to the end of page
i, up to a 64-bit hash collision. The radix tree indexes children by page key and checks a
whole edge by comparing its last key, so a lookup costs O(nodes on the path), not O(tokens).

Computing keys is O(tokens) once; what makes lookups cheap is computing them *once per
token*. A sequence may carry its keys: anything with a ``page_keys(page_size, n_pages)``
method is asked instead of hashed (see `TokenSnapshot`, a copy-free snapshot of an
append-only token list that memoizes its keys, and `TokenPrefix`, a copy-free prefix
view). Python's hash of ints and tuples of ints is not randomized, so keys, and every
simulation that uses them, are deterministic across runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, Protocol, overload

__all__ = [
    "ROOT_KEY",
    "AppendOnlyPageKeys",
    "TokenPrefix",
    "TokenSequence",
    "TokenSnapshot",
    "append_only_origin",
    "continue_page_keys",
    "extend_page_keys",
    "page_keys",
]

ROOT_KEY = 0x5EED_CAFE  # the key "before" the first page (any fixed value works)

Tokens = tuple[int, ...]


class TokenSequence(Protocol):
    """What the cache reads token ids from: a tuple or list, or a copy-free view (`len`,
    indexing and slicing only). It may also carry `page_keys(page_size, n_pages)`."""

    def __len__(self) -> int: ...

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...


def extend_page_keys(
    keys: list[int], tokens: TokenSequence, page_size: int, n_pages: int
) -> list[int]:
    """Append to `keys` (the keys of the first pages of `tokens`) those of pages up to
    `n_pages`; returns `keys`. `tokens` must hold at least `n_pages` whole pages."""
    if n_pages * page_size > len(tokens):
        raise ValueError(
            f"{n_pages} pages of {page_size} tokens do not fit in a {len(tokens)}-token sequence"
        )
    previous = keys[-1] if keys else ROOT_KEY
    keys.extend(_chain(tokens, page_size, len(keys), n_pages, previous))
    return keys


def continue_page_keys(tokens: TokenSequence, page_size: int, previous_key: int) -> list[int]:
    """The keys of the whole pages of `tokens` when they follow a prefix whose last page key
    is `previous_key` (`ROOT_KEY` for none): a new edge below an existing node."""
    return _chain(tokens, page_size, 0, len(tokens) // page_size, previous_key)


def _chain(
    tokens: TokenSequence, page_size: int, first_page: int, n_pages: int, previous: int
) -> list[int]:
    keys: list[int] = []
    append = keys.append
    for start in range(first_page * page_size, n_pages * page_size, page_size):
        previous = hash((previous, tuple(tokens[start : start + page_size])))
        append(previous)
    return keys


def page_keys(tokens: TokenSequence, page_size: int, n_pages: int) -> Sequence[int]:
    """The keys of the first `n_pages` whole pages of `tokens` (at least that many entries:
    read only the first `n_pages`). Asks the sequence if it carries its keys."""
    carried = getattr(tokens, "page_keys", None)
    if carried is not None:
        keys: Sequence[int] = carried(page_size, n_pages)
        return keys
    return extend_page_keys([], tokens, page_size, n_pages)


def append_only_origin(tokens: object) -> tuple[list[int], int] | None:
    """The append-only list `tokens` reads from and how many of its first tokens `tokens`
    shares with it (None: no such list is known).

    Two sequences with the same origin list agree on every position below both lengths, with
    no comparison: the list is never rewritten, only appended to (`TokenSnapshot`). A prefix
    cache uses it to skip comparing a context with the pages that same context cached before.
    """
    origin = getattr(tokens, "append_only_origin", None)
    if origin is None:
        return None
    found: tuple[list[int], int] | None = origin()
    return found


class AppendOnlyPageKeys:
    """Memoized page keys of a token list that only ever grows (a trajectory's record).

    Pages once complete never change, so keys computed for a shorter snapshot stay valid for
    every later one: each page is hashed once over the whole episode.
    """

    __slots__ = ("_keys", "_tokens")

    def __init__(self, tokens: list[int]) -> None:
        self._tokens = tokens  # shared with its owner, who only appends to it
        self._keys: dict[int, list[int]] = {}

    def page_keys(self, page_size: int, n_pages: int) -> list[int]:
        keys = self._keys.setdefault(page_size, [])
        if len(keys) < n_pages:
            extend_page_keys(keys, self._tokens, page_size, n_pages)
        return keys


class TokenPrefix(Sequence[int]):
    """The first `length` tokens of `base` without copying them; slices come back as tuples
    (clipped to the prefix), and page keys are `base`'s."""

    __slots__ = ("_base", "_length")

    def __init__(self, base: TokenSequence, length: int) -> None:
        if not 0 <= length <= len(base):
            raise ValueError(f"a prefix of {length} tokens of a {len(base)}-token sequence")
        self._base = base
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Tokens: ...

    def __getitem__(self, index: int | slice) -> int | Tokens:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            return tuple(self._base[start:stop:step])  # a tuple's own slice is not copied
        position = index + self._length if index < 0 else index
        if not 0 <= position < self._length:
            raise IndexError("token prefix index out of range")
        return self._base[position]

    def __iter__(self) -> Iterator[int]:
        # Any TokenSequence iterates (indexing from 0 until IndexError, if it has no
        # __iter__); the protocol only promises len and indexing.
        return islice(self._base, self._length)  # type: ignore[call-overload]

    def page_keys(self, page_size: int, n_pages: int) -> Sequence[int]:
        if n_pages * page_size > self._length:
            raise ValueError(
                f"{n_pages} pages of {page_size} tokens do not fit in {self._length} tokens"
            )
        return self._keys_of_base(page_size, n_pages)

    def _keys_of_base(self, page_size: int, n_pages: int) -> Sequence[int]:
        return page_keys(self._base, page_size, n_pages)

    def append_only_origin(self) -> tuple[list[int], int] | None:
        """`base`'s append-only origin, clipped to this prefix (see `append_only_origin`)."""
        origin = append_only_origin(self._base)
        if origin is None:
            return None
        return origin[0], min(origin[1], self._length)


class TokenSnapshot(TokenPrefix):
    """The ids of a list that only ever grows, as long as it is now, frozen without copying.

    What a trajectory record hands to the engine each turn: O(1) to take however long the
    context is, equal to (and hashed like) the tuple of its ids, slices come back as tuples,
    and `page_keys` come from the record's memo. Valid only while the owner never rewrites or
    truncates the list (the `TrajectoryBuilder` only appends). Pickles as a plain tuple.
    """

    __slots__ = ("_memo",)

    def __init__(self, tokens: list[int], memo: AppendOnlyPageKeys | None = None) -> None:
        super().__init__(tokens, len(tokens))
        self._memo = memo

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenSnapshot | tuple | list):
            return len(other) == self._length and self[:] == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self[:])

    def __add__(self, other: Sequence[int]) -> Tokens:
        return self[:] + tuple(other)

    def __radd__(self, other: Sequence[int]) -> Tokens:
        return tuple(other) + self[:]

    def __repr__(self) -> str:
        return f"TokenSnapshot({self._length} tokens)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (self[:],))

    def append_only_origin(self) -> tuple[list[int], int]:
        """The owner's list itself: it only ever grows, so its first tokens are ours."""
        base: list[int] = self._base  # type: ignore[assignment]  # a list by construction
        return base, self._length

    def _keys_of_base(self, page_size: int, n_pages: int) -> Sequence[int]:
        if self._memo is None:
            return super()._keys_of_base(page_size, n_pages)
        return self._memo.page_keys(page_size, n_pages)
