"""The patch's non-test source changes: what the second verdict applies (pure).

The second verdict re-runs the FAIL_TO_PASS tests in a fresh sandbox with only the part of the
patch a genuine fix needs: changes to regular files of the project's source. Dropped are the
file sections that touch a protected path (tests, conftest, caches, packaging metadata), a file
that configures Python or pytest, a module at the repository root named like a standard-library
module, and any symlink or submodule. A fix that passes only with what was dropped was not a fix
of the source.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SourceChanges", "shadows_stdlib", "source_changes"]

_SECTION_START = re.compile(rb"^diff --git ", re.MULTILINE)
_PLAIN_SECTION_START = re.compile(rb"^--- (?=.*\n\+\+\+ )", re.MULTILINE)
_PATH_LINES = (
    re.compile(rb"^diff --git a/(.+?) b/(.+)$", re.MULTILINE),
    re.compile(rb"^(?:---|\+\+\+) (?:[ab]/)?(.+?)\t?$", re.MULTILINE),
    re.compile(rb"^(?:rename|copy) (?:from|to) (.+)$", re.MULTILINE),
)
# A symlink (120000) or a submodule (160000) on either side of the section.
_SPECIAL_MODE = re.compile(
    rb"^(?:(?:new file|deleted file|old|new) mode|index [0-9a-f]+\.\.[0-9a-f]+) 1[26]0000\b",
    re.MULTILINE,
)


@dataclass(frozen=True, slots=True)
class SourceChanges:
    """The kept part of a patch (`diff`, may be empty) and the paths of what was dropped."""

    diff: bytes
    dropped_paths: tuple[str, ...]


def source_changes(diff: bytes, drop: Callable[[str], bool]) -> SourceChanges:
    """Keep the file sections of `diff` whose paths `drop` refuses none of (and that involve no
    symlink or submodule)."""
    kept: list[bytes] = []
    dropped: list[str] = []
    for section in _sections(diff):
        header = _header(section)
        paths = _paths(header)
        if not paths:
            continue  # no file named: nothing a fix could need
        if _SPECIAL_MODE.search(header) or any(drop(path) for path in paths):
            dropped.extend(paths)
        else:
            kept.append(section)
    return SourceChanges(b"".join(kept), tuple(dict.fromkeys(dropped)))


def shadows_stdlib(path: str) -> bool:
    """Whether `path` is a module or package at the repository root named like a standard-
    library module (of this interpreter; the images' differ only at the edges)."""
    first, _, rest = path.strip("/").partition("/")
    name = first if rest else first.removesuffix(".py")
    if not rest and not first.endswith(".py"):
        return False
    return name in sys.stdlib_module_names


def _sections(diff: bytes) -> list[bytes]:
    starts = [match.start() for match in _SECTION_START.finditer(diff)]
    if not starts:
        starts = [match.start() for match in _PLAIN_SECTION_START.finditer(diff)]
    if not starts:
        return []
    bounds = [*starts, len(diff)]
    return [diff[bounds[index] : bounds[index + 1]] for index in range(len(starts))]


def _header(section: bytes) -> bytes:
    """The section's lines before its first hunk or binary payload (hunk lines may look like
    headers: a removed `-- x` line reads `--- x`)."""
    for marker in (b"\n@@", b"\nGIT binary patch", b"\nBinary files "):
        section = section.split(marker, 1)[0]
    return section + b"\n"


def _paths(header: bytes) -> tuple[str, ...]:
    found: list[str] = []
    for pattern in _PATH_LINES:
        for match in pattern.finditer(header):
            found.extend(group.decode("utf-8", "surrogateescape") for group in match.groups())
    return tuple(dict.fromkeys(path for path in found if path != "/dev/null"))
