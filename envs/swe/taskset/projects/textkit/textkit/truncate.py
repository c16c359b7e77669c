"""Shorten text to a length limit."""

from __future__ import annotations

_TRAILING_PUNCTUATION = " ,;:.-"


def truncate(text: str, limit: int, *, ellipsis: str = "…", word_boundary: bool = True) -> str:
    """Shorten ``text`` to at most ``limit`` characters, the ellipsis included.

    Text that fits is returned unchanged. With ``word_boundary`` the cut moves
    back to the end of the last whole word, if there is one.
    """
    if limit < len(ellipsis):
        raise ValueError(f"limit {limit} is shorter than the ellipsis {ellipsis!r}")
    if len(text) <= limit:
        return text
    room = limit - len(ellipsis)
    cut = text[:room]
    if word_boundary and not text[room].isspace():
        space = cut.rfind(" ")
        if space > 0:
            cut = cut[:space]
    return cut.rstrip(_TRAILING_PUNCTUATION) + ellipsis


def truncate_middle(text: str, limit: int, *, ellipsis: str = "…") -> str:
    """Shorten ``text`` by replacing its middle, keeping the start and the end.

    Useful for paths: ``truncate_middle("/usr/local/lib/python3/site.py", 16)``
    gives ``"/usr/loc…site.py"``. The start gets the extra character when the
    room left is odd.
    """
    if limit < len(ellipsis):
        raise ValueError(f"limit {limit} is shorter than the ellipsis {ellipsis!r}")
    if len(text) <= limit:
        return text
    room = limit - len(ellipsis)
    head = (room + 1) // 2
    tail = room - head
    return text[:head] + ellipsis + text[len(text) - tail :]
