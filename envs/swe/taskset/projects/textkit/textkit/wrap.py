"""Greedy word wrapping."""

from __future__ import annotations


def wrap(
    text: str, width: int = 70, *, indent: str = "", break_long_words: bool = True
) -> list[str]:
    """Wrap ``text`` into lines of at most ``width`` characters, ``indent`` included.

    Whitespace between words collapses to one space. Words longer than a line
    are split across lines, unless ``break_long_words`` is False, in which case
    they get a line of their own and may exceed the width.
    """
    room = width - len(indent)
    if room <= 0:
        raise ValueError(f"width {width} leaves no room after the indent {indent!r}")
    lines: list[str] = []
    current = ""
    for word in text.split():
        while break_long_words and len(word) > room:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:room])
            word = word[room:]
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= room:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return [indent + line for line in lines]


def fill(text: str, width: int = 70, **options: object) -> str:
    """Like `wrap`, but wraps each paragraph (separated by blank lines) and joins the lines."""
    paragraphs = [part for part in text.split("\n\n") if part.strip()]
    return "\n\n".join(
        "\n".join(wrap(paragraph, width, **options))
        for paragraph in paragraphs  # type: ignore[arg-type]
    )
