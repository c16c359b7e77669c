"""The parsed configuration: sections of options, typed getters and ``${...}`` references."""

from __future__ import annotations

import re
from collections import ChainMap
from collections.abc import Iterator

from inikit.errors import InterpolationError, MissingOptionError

DEFAULT_SECTION = "DEFAULT"
MAX_INTERPOLATION_DEPTH = 10

_TRUE = frozenset({"1", "yes", "true", "on"})
_FALSE = frozenset({"0", "no", "false", "off"})
_REFERENCE = re.compile(r"\$\{(?:(?P<section>[^:}]+):)?(?P<key>[^}]+)\}")

_MISSING = object()

Section = dict[str, str]


class Config:
    """Sections of ``key -> value`` strings. Keys are case-insensitive.

    Options of the ``[DEFAULT]`` section are visible in every other section
    unless that section sets the same key itself.
    """

    def __init__(self) -> None:
        self._sections: dict[str, Section] = {DEFAULT_SECTION: {}}

    def add_section(self, name: str) -> None:
        self._sections.setdefault(name, {})

    def sections(self) -> list[str]:
        """Section names in file order, without ``DEFAULT``."""
        return [name for name in self._sections if name != DEFAULT_SECTION]

    def has_section(self, name: str) -> bool:
        return name in self._sections

    def has_option(self, section: str, key: str, *, inherit: bool = True) -> bool:
        if section not in self._sections:
            return False
        options = self._options(section) if inherit else self._sections[section]
        return key.lower() in options

    def options(self, section: str) -> dict[str, str]:
        """All raw options visible in ``section``, including inherited defaults."""
        return dict(self._options(section))

    def set(self, section: str, key: str, value: str) -> None:
        self.add_section(section)
        self._sections[section][key.lower()] = value

    def _options(self, section: str) -> ChainMap[str, str]:
        if section not in self._sections:
            raise MissingOptionError(f"no section [{section}]")
        return ChainMap(self._sections[section], self._sections[DEFAULT_SECTION])

    def get(self, section: str, key: str, default: object = _MISSING, *, raw: bool = False) -> str:
        """The value of ``key`` in ``section`` with ``${...}`` references expanded.

        Returns ``default`` if given and the option is missing; otherwise a
        missing option raises MissingOptionError.
        """
        options = self._options(section)
        key = key.lower()
        if key not in options:
            if default is not _MISSING:
                return default  # type: ignore[return-value]
            raise MissingOptionError(f"no option {key!r} in section [{section}]")
        value = options[key]
        if raw:
            return value
        return self._expand(section, value, depth=1)

    def _expand(self, section: str, value: str, depth: int) -> str:
        if "${" not in value:
            return value
        if depth > MAX_INTERPOLATION_DEPTH:
            raise InterpolationError(
                f"references nested deeper than {MAX_INTERPOLATION_DEPTH} levels in [{section}]"
            )

        def replace(match: re.Match[str]) -> str:
            target_section = match.group("section") or section
            key = match.group("key").lower()
            options = self._options(target_section)
            if key not in options:
                raise InterpolationError(f"unknown reference ${{{match.group(0)[2:-1]}}}")
            return self._expand(target_section, options[key], depth + 1)

        return _REFERENCE.sub(replace, value)

    def getint(self, section: str, key: str, default: object = _MISSING) -> int:
        value = self.get(section, key, default)
        return value if isinstance(value, int) else int(value)

    def getfloat(self, section: str, key: str, default: object = _MISSING) -> float:
        value = self.get(section, key, default)
        return value if isinstance(value, float) else float(value)

    def getbool(self, section: str, key: str, default: object = _MISSING) -> bool:
        value = self.get(section, key, default)
        if isinstance(value, bool):
            return value
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(f"not a boolean: {value!r} ([{section}] {key})")

    def getlist(self, section: str, key: str, separator: str = ",") -> list[str]:
        """Split a value on ``separator`` (and newlines), dropping empty items."""
        value = self.get(section, key)
        items = []
        for line in value.splitlines():
            for item in line.split(separator):
                item = item.strip()
                if item:
                    items.append(item)
        return items

    def __iter__(self) -> Iterator[str]:
        return iter(self.sections())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return self._sections == other._sections

    def raw_sections(self) -> dict[str, Section]:
        """A copy of every section's own options, ``DEFAULT`` first."""
        return {name: dict(options) for name, options in self._sections.items()}
