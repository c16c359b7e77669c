"""Version ranges in npm syntax: ``^1.2.3``, ``~1.2``, ``>=1.0.0 <2.0.0 || 3.x``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from semverlite.version import InvalidVersionError, Version, compare

_OPERATORS = ("<=", ">=", "<", ">", "=")
_PARTIAL = re.compile(
    r"^v?(?P<major>\d+|[xX*])(?:\.(?P<minor>\d+|[xX*]))?(?:\.(?P<patch>\d+|[xX*]))?"
    r"(?:-(?P<prerelease>[0-9A-Za-z.-]+))?$"
)


@dataclass(frozen=True)
class Comparator:
    """One condition such as ``>=1.2.0``."""

    operator: str
    version: Version

    def matches(self, version: Version) -> bool:
        order = compare(version, self.version)
        if self.operator == "<":
            return order < 0
        if self.operator == "<=":
            return order <= 0
        if self.operator == ">":
            return order > 0
        if self.operator == ">=":
            return order >= 0
        return order == 0

    def __str__(self) -> str:
        return f"{self.operator}{self.version}"


def _partial(text: str) -> tuple[int | None, int | None, int | None, tuple[str, ...]]:
    """Parse a possibly partial version: missing or ``x`` parts become None."""
    match = _PARTIAL.match(text)
    if match is None:
        raise InvalidVersionError(f"not a version or partial version: {text!r}")
    parts: list[int | None] = []
    for name in ("major", "minor", "patch"):
        value = match.group(name)
        parts.append(None if value is None or value in "xX*" else int(value))
    major, minor, patch = parts
    if major is None and (minor is not None or patch is not None):
        raise InvalidVersionError(f"wildcard major with a fixed minor or patch: {text!r}")
    prerelease = tuple(match.group("prerelease").split(".")) if match.group("prerelease") else ()
    return major, minor, patch, prerelease


def _caret(text: str) -> list[Comparator]:
    """``^`` allows changes that do not modify the left-most non-zero part."""
    major, minor, patch, prerelease = _partial(text)
    if major is None:
        return []
    lower = Version(major, minor or 0, patch or 0, prerelease)
    if major > 0 or minor is None:
        upper = Version(major + 1, 0, 0)
    elif minor > 0 or patch is None:
        upper = Version(0, minor + 1, 0)
    else:
        upper = Version(0, 0, patch + 1)
    return [Comparator(">=", lower), Comparator("<", upper)]


def _tilde(text: str) -> list[Comparator]:
    """``~`` allows patch-level changes if a minor version is given, else minor-level ones."""
    major, minor, patch, prerelease = _partial(text)
    if major is None:
        return []
    lower = Version(major, minor or 0, patch or 0, prerelease)
    if minor is None:
        upper = Version(major + 1, 0, 0)
    else:
        upper = Version(major, minor + 1, 0)
    return [Comparator(">=", lower), Comparator("<", upper)]


def _plain(operator: str, text: str) -> list[Comparator]:
    major, minor, patch, prerelease = _partial(text)
    if major is None:
        return [] if operator in ("", "=", ">=", "<=") else [Comparator("<", Version(0, 0, 0))]
    if minor is not None and patch is not None:
        return [Comparator(operator or "=", Version(major, minor, patch, prerelease))]
    # A partial version is a range of its own: 1.2 means >=1.2.0 <1.3.0.
    lower = Version(major, minor or 0, 0)
    upper = Version(major + 1, 0, 0) if minor is None else Version(major, minor + 1, 0)
    if operator in ("", "="):
        return [Comparator(">=", lower), Comparator("<", upper)]
    if operator == ">":
        return [Comparator(">=", upper)]
    if operator == "<=":
        return [Comparator("<", upper)]
    return [Comparator(operator, lower)]


def _comparators(token: str) -> list[Comparator]:
    if token.startswith("^"):
        return _caret(token[1:])
    if token.startswith("~"):
        return _tilde(token[1:])
    for operator in _OPERATORS:
        if token.startswith(operator):
            return _plain(operator, token[len(operator) :])
    return _plain("", token)


def _prerelease_allowed(version: Version, group: list[Comparator]) -> bool:
    """A pre-release only matches if the range names a pre-release of the same core version."""
    if not version.is_prerelease:
        return True
    return any(
        comparator.version.is_prerelease and comparator.version.core == version.core
        for comparator in group
    )


class Range:
    """Alternatives (joined by ``||``) of comparator groups (all of which must match)."""

    def __init__(self, alternatives: list[list[Comparator]]) -> None:
        self.alternatives = alternatives

    @classmethod
    def parse(cls, text: str) -> Range:
        alternatives = []
        for alternative in text.split("||"):
            # Allow a space after an operator: ">= 1.2.3".
            tokens = re.sub(r"(<=|>=|<|>|=|\^|~)\s+", r"\1", alternative.strip()).split()
            group: list[Comparator] = []
            for token in tokens:
                group.extend(_comparators(token))
            alternatives.append(group)
        return cls(alternatives)

    def contains(self, version: Version | str, include_prerelease: bool = False) -> bool:
        """Whether ``version`` satisfies the range.

        Pre-releases are excluded unless the range mentions a pre-release of
        the same core version, or ``include_prerelease`` is set.
        """
        if isinstance(version, str):
            version = Version.parse(version)
        for group in self.alternatives:
            if not all(comparator.matches(version) for comparator in group):
                continue
            if include_prerelease or _prerelease_allowed(version, group):
                return True
        return False

    def __contains__(self, version: Version | str) -> bool:
        return self.contains(version)

    def max_satisfying(self, versions: Iterable[Version | str]) -> Version | None:
        """The highest version in ``versions`` that the range contains, or None."""
        best: Version | None = None
        for candidate in versions:
            version = Version.parse(candidate) if isinstance(candidate, str) else candidate
            if self.contains(version) and (best is None or version > best):
                best = version
        return best

    def __str__(self) -> str:
        return " || ".join(
            " ".join(str(comparator) for comparator in group) or "*" for group in self.alternatives
        )
