"""Write git-style unified diffs between two file snapshots, without running git.

The output applies with `git apply` (and `patch -p1`) at the repository root: each file gets a
`diff --git a/<path> b/<path>` header, added and deleted files get `new file mode` /
`deleted file mode` lines and `/dev/null` sides, and hunks carry three lines of context. Being
pure Python, the same inputs give byte-identical output on every machine and git version.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping

__all__ = ["CONTEXT_LINES", "changed_paths", "diff_paths", "unified_diff"]

CONTEXT_LINES = 3
"""Lines of context around each change, as `git diff` uses by default."""

_NO_NEWLINE = "\\ No newline at end of file\n"
_FILE_MODE = "100644"


def changed_paths(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Paths whose content differs between the snapshots (added, deleted or modified), sorted."""
    return sorted(path for path in old.keys() | new.keys() if old.get(path) != new.get(path))


def diff_paths(diff: str) -> list[str]:
    """The paths a git-style diff touches, from its `diff --git a/<path> b/<path>` headers."""
    return [
        line.split(" b/", 1)[1]
        for line in diff.splitlines()
        if line.startswith("diff --git a/") and " b/" in line
    ]


def unified_diff(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """A git-style diff that turns snapshot `old` into snapshot `new` (path -> text).

    Files are listed in sorted path order; unchanged files are omitted; an empty string means
    the snapshots are equal.

    Raises:
        ValueError: a path holds whitespace or a quote, which git would quote in headers.
    """
    return "".join(
        "".join(_file_diff(path, old.get(path), new.get(path))) for path in changed_paths(old, new)
    )


def _file_diff(path: str, before: str | None, after: str | None) -> Iterator[str]:
    if any(char.isspace() or char in "\"'\\" for char in path):
        raise ValueError(f"path {path!r} must not hold whitespace, quotes or backslashes")
    yield f"diff --git a/{path} b/{path}\n"
    if before is None:
        yield f"new file mode {_FILE_MODE}\n"
    elif after is None:
        yield f"deleted file mode {_FILE_MODE}\n"
    before_lines = (before or "").splitlines(keepends=True)
    after_lines = (after or "").splitlines(keepends=True)
    if not before_lines and not after_lines:
        return
    yield "--- /dev/null\n" if before is None else f"--- a/{path}\n"
    yield "+++ /dev/null\n" if after is None else f"+++ b/{path}\n"
    hunks = difflib.unified_diff(before_lines, after_lines, n=CONTEXT_LINES, lineterm="\n")
    for line in list(hunks)[2:]:  # the first two lines are difflib's own ---/+++ header
        if line.endswith("\n"):
            yield line
        else:
            yield line + "\n" + _NO_NEWLINE
