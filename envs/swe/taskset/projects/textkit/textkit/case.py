"""Title case, snake_case and camelCase conversion."""

from __future__ import annotations

import re

SMALL_WORDS = frozenset("a an and as at but by for in nor of on or the to vs via".split())

_ACRONYM_BOUNDARY = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_BOUNDARY = re.compile(r"([a-z0-9])([A-Z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def title_case(text: str) -> str:
    """Capitalize each word, except small words such as "of" or "the".

    The first and the last word are always capitalized; words written in
    capitals (acronyms such as "NASA") are kept as they are.
    """
    words = text.split()
    result = []
    for index, word in enumerate(words):
        lower = word.lower()
        is_edge = index == 0 or index == len(words) - 1
        if lower in SMALL_WORDS and not is_edge:
            result.append(lower)
        elif word.isupper() and len(word) > 1:
            result.append(word)
        else:
            result.append(word[:1].upper() + word[1:].lower())
    return " ".join(result)


def snake_case(text: str) -> str:
    """``"HTTPServerError"`` -> ``"http_server_error"``, ``"Some text!"`` -> ``"some_text"``."""
    text = _ACRONYM_BOUNDARY.sub(r"\1_\2", text)
    text = _WORD_BOUNDARY.sub(r"\1_\2", text)
    text = re.sub(_SEPARATORS, "_", text)
    return text.strip("_").lower()


def camel_case(text: str, upper_first: bool = False) -> str:
    """``"http server error"`` -> ``"httpServerError"`` (``"HttpServerError"`` with upper_first)."""
    parts = [part for part in snake_case(text).split("_") if part]
    if not parts:
        return ""
    head = parts[0].capitalize() if upper_first else parts[0]
    return head + "".join(part.capitalize() for part in parts[1:])
