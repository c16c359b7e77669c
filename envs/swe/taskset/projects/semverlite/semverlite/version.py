"""Semantic versions (semver 2.0.0): parsing, precedence and printing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

_NUMBER = r"0|[1-9]\d*"
_IDENTIFIERS = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_VERSION = re.compile(
    rf"^v?(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<prerelease>{_IDENTIFIERS}))?(?:\+(?P<build>{_IDENTIFIERS}))?$"
)


class InvalidVersionError(ValueError):
    """The text is not a semantic version."""


@total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    """A semantic version. Build metadata is kept but ignored when comparing."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse ``"1.2.3"``, ``"1.2.3-rc.1+build.5"`` or ``"v1.2.3"``."""
        match = _VERSION.match(text.strip())
        if match is None:
            raise InvalidVersionError(f"not a semantic version: {text!r}")
        prerelease_text = match.group("prerelease")
        prerelease = tuple(prerelease_text.split(".")) if prerelease_text else ()
        for identifier in prerelease:
            if identifier.isdigit() and len(identifier) > 1 and identifier.startswith("0"):
                raise InvalidVersionError(
                    f"numeric pre-release identifier {identifier!r} has a leading zero: {text!r}"
                )
        build = tuple(match.group("build").split(".")) if match.group("build") else ()
        return cls(
            int(match.group("major")),
            int(match.group("minor")),
            int(match.group("patch")),
            prerelease,
            build,
        )

    @property
    def core(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Version({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return compare(self, other) == 0

    def __hash__(self) -> int:
        return hash((self.core, self.prerelease))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return compare(self, other) < 0


def compare(left: Version, right: Version) -> int:
    """Return -1, 0 or 1 as ``left`` has lower, equal or higher precedence than ``right``."""
    if left.core != right.core:
        return -1 if left.core < right.core else 1
    return _compare_prerelease(left.prerelease, right.prerelease)


def _compare_prerelease(left: tuple[str, ...], right: tuple[str, ...]) -> int:
    if left == right:
        return 0
    # A release has higher precedence than any of its pre-releases.
    if not left:
        return 1
    if not right:
        return -1
    for mine, theirs in zip(left, right, strict=False):
        if mine == theirs:
            continue
        mine_numeric, theirs_numeric = mine.isdigit(), theirs.isdigit()
        if mine_numeric and theirs_numeric:
            return -1 if int(mine) < int(theirs) else 1
        if mine_numeric != theirs_numeric:
            # Numeric identifiers have lower precedence than alphanumeric ones.
            return -1 if mine_numeric else 1
        return -1 if mine < theirs else 1
    # All shared identifiers are equal: the shorter list has lower precedence.
    return -1 if len(left) < len(right) else 1
