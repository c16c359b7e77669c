"""Compute the next version."""

from __future__ import annotations

from semverlite.version import Version

PARTS = ("major", "minor", "patch", "prerelease")


def bump(version: Version, part: str, tag: str = "rc") -> Version:
    """Return the next ``major``, ``minor``, ``patch`` or ``prerelease`` version.

    Build metadata is dropped. Bumping the patch of a pre-release releases it
    (``1.2.3-rc.1`` -> ``1.2.3``). Bumping the pre-release of a release starts
    a pre-release of the next patch (``1.2.3`` -> ``1.2.4-rc.0``); bumping it
    again increments the trailing number (``1.2.4-rc.0`` -> ``1.2.4-rc.1``).
    """
    if part == "major":
        return Version(version.major + 1, 0, 0)
    if part == "minor":
        return Version(version.major, version.minor + 1, 0)
    if part == "patch":
        if version.is_prerelease:
            return Version(version.major, version.minor, version.patch)
        return Version(version.major, version.minor, version.patch + 1)
    if part == "prerelease":
        if not version.is_prerelease:
            return Version(version.major, version.minor, version.patch + 1, (tag, "0"))
        *head, last = version.prerelease
        if last.isdigit():
            return Version(*version.core, (*head, str(int(last) + 1)))
        return Version(*version.core, (*version.prerelease, "0"))
    raise ValueError(f"unknown part {part!r}; expected one of {', '.join(PARTS)}")
