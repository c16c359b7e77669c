"""Turn INI text into a `Config`."""

from __future__ import annotations

import re
from typing import TextIO

from inikit.config import Config
from inikit.errors import ParseError

_SECTION = re.compile(r"^\[(?P<name>[^\]]+)\]\s*$")
_OPTION = re.compile(r"^(?P<key>[^=:\s][^=:]*?)\s*[=:]\s*(?P<value>.*)$")
_COMMENT_PREFIXES = ("#", ";")


def _strip_inline_comment(value: str) -> str:
    """Drop a trailing ``# comment`` that is preceded by whitespace."""
    match = re.search(r"\s#", value)
    if match is not None:
        value = value[: match.start()]
    return value.strip()


def _parse_value(text: str) -> str:
    """A value without its inline comment; quotes keep spaces and ``#`` inside them."""
    text = text.strip()
    if text[:1] in ("'", '"'):
        closing = text.find(text[0], 1)
        if closing != -1:
            return text[1:closing]
    return _strip_inline_comment(text)


def loads(text: str, *, allow_duplicates: bool = False) -> Config:
    """Parse INI text.

    Raises ParseError (with the line number) for lines that are not a section
    header, an option, a continuation, a comment or blank; for options outside a
    section; and for a repeated option unless ``allow_duplicates`` is set, in
    which case the last value wins.
    """
    config = Config()
    section: str | None = None
    key: str | None = None
    for lineno, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith(_COMMENT_PREFIXES):
            continue
        if line[0] in " \t" and key is not None and section is not None:
            previous = config.get(section, key, raw=True)
            config.set(section, key, previous + "\n" + _strip_inline_comment(stripped))
            continue
        header = _SECTION.match(stripped)
        if header is not None:
            section = header.group("name").strip()
            config.add_section(section)
            key = None
            continue
        option = _OPTION.match(stripped)
        if option is None:
            raise ParseError(f"expected 'key = value' or '[section]', got {stripped!r}", lineno)
        if section is None:
            raise ParseError("option outside of any section", lineno)
        key = option.group("key").strip().lower()
        if not allow_duplicates and config.has_option(section, key, inherit=False):
            raise ParseError(f"duplicate option {key!r} in section [{section}]", lineno)
        config.set(section, key, _parse_value(option.group("value")))
    return config


def load(stream: TextIO, **options: bool) -> Config:
    """Parse INI text read from an open file."""
    return loads(stream.read(), **options)
