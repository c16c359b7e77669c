"""The editor's text operations: pure, linear in the file and bounded in what they build.

An agent chooses the file and the strings, so every operation here costs at most a few passes
of C-level string methods over the file (`count`, `find`, `split` with a bound) plus work
proportional to what it returns, which is itself bounded (listed matches, viewed characters,
snippet lines). Issue 28 measured the old per-match line count (`text.count` from the start
for every match) at 11 s for one call on a 1 MB file, on the event loop's only thread; the
editor also runs these functions in a worker thread (`envs.swe.editor`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CLIP_NOTE",
    "Matches",
    "clip_text",
    "find_matches",
    "insert_after_line",
    "line_count",
    "match_line_numbers",
    "number_lines",
    "numbered_view",
    "quote",
    "snippet",
    "split_lines",
]

CLIP_NOTE = (
    "<response clipped><NOTE>Only part of this output is shown to save context. Search the file "
    "with `grep -n` and view the lines you need with `view_range`.</NOTE>"
)


@dataclass(frozen=True, slots=True)
class Matches:
    """Where a string occurs: `count` non-overlapping occurrences, the line of the first
    `len(lines)` of them (1-based), and the character offset of the first."""

    count: int
    lines: tuple[int, ...]
    first_offset: int


def split_lines(text: str) -> list[str]:
    """Lines as `cat -n` and `grep -n` count them (only `\\n` ends a line), ends kept."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def line_count(text: str) -> int:
    """How many lines `split_lines(text)` has, without building them."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def number_lines(text: str, first_line: int = 1) -> str:
    """`text` with right-aligned line numbers starting at `first_line`, as `cat -n` prints."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines, first_line))


def find_matches(text: str, needle: str, *, max_listed: int) -> Matches:
    """Every non-overlapping occurrence of `needle` (counted), with the lines of the first
    `max_listed`: one pass over the text, however many matches there are."""
    if not needle:
        return Matches(0, (), -1)
    count = text.count(needle)
    lines: list[int] = []
    first = start = text.find(needle)
    line, counted_to = 1, 0
    while start != -1 and len(lines) < max_listed:
        line += text.count("\n", counted_to, start)  # only the stretch since the last match
        counted_to = start
        lines.append(line)
        start = text.find(needle, start + len(needle))
    return Matches(count, tuple(lines), first)


def match_line_numbers(text: str, needle: str) -> list[int]:
    """1-based line numbers where each non-overlapping occurrence of `needle` starts."""
    return list(find_matches(text, needle, max_listed=len(text) + 1).lines)


def insert_after_line(text: str, line: int, new_str: str) -> str:
    """`text` with `new_str` inserted as whole lines after line `line` (0 = before line 1)."""
    block = new_str if new_str.endswith("\n") else new_str + "\n"
    if line <= 0:
        return block + text
    offset = _offset_after_line(text, line)
    if offset == -1:  # after the last line, which has no newline: end it first
        return text + "\n" + block
    return text[:offset] + block + text[offset:]


def numbered_view(text: str, first_line: int, last_line: int | None, max_chars: int) -> str:
    """Lines `first_line`..`last_line` (None: to the end) as `cat -n` prints them, clipped at
    `max_chars` characters; only about `max_chars` characters of the file are numbered."""
    start = _offset_of_line(text, first_line)
    end = len(text) if last_line is None else _offset_after_line(text, last_line)
    if end == -1:
        end = len(text)
    # Each numbered line is longer than its text, so max_chars of text is always enough.
    # A cut window yields more than max_chars numbered characters, so the note is added.
    window = text[start : min(end, start + max_chars + 1)]
    return clip_text(number_lines(window, first_line), max_chars)


def snippet(text: str, first_changed: int, last_changed: int, context: int) -> str:
    """Lines `first_changed - context` .. `last_changed + context` of `text`, numbered."""
    first = max(1, first_changed - context)
    last = min(line_count(text), last_changed + context)
    if last < first:
        return number_lines("", first)
    start = _offset_of_line(text, first)
    end = _offset_after_line(text, last)
    return number_lines(text[start : len(text) if end == -1 else end], first)


def clip_text(text: str, max_chars: int) -> str:
    """`text`, cut after `max_chars` characters with a note saying how to see the rest."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + "\n" + CLIP_NOTE


def quote(text: str, max_chars: int) -> str:
    """`text` as a message quotes it: at most `max_chars` characters, with how many were left
    out (an agent's 5 MB `old_str` is not echoed back whole)."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}... [{len(text) - max_chars} more characters]"


def _offset_of_line(text: str, line: int) -> int:
    """Character offset where 1-based `line` starts (`len(text)` past the last line)."""
    if line <= 1:
        return 0
    offset = _offset_after_line(text, line - 1)
    return len(text) if offset == -1 else offset


def _offset_after_line(text: str, line: int) -> int:
    """Offset just after the newline that ends `line` (1-based); -1 if that line has none.

    Whole chunks are skipped by counting their newlines (C-level, a few microseconds each),
    then the line's end is found inside its chunk: no list of lines is ever built, and no
    single call holds the interpreter for long (a `split` of a 10 MB file held it 0.1 s).
    """
    position, remaining, size = 0, line, len(text)
    while True:
        if position >= size:
            return -1
        end = min(position + _CHUNK_CHARS, size)
        newlines = text.count("\n", position, end)
        if newlines >= remaining:
            break
        remaining -= newlines
        position = end
    for _ in range(remaining):
        position = text.find("\n", position) + 1
    return position


_CHUNK_CHARS = 16_384
"""Characters counted per call when looking for a line (see `_offset_after_line`)."""
