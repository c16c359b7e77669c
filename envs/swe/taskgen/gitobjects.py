"""Compute git blob, tree and commit ids of a file snapshot without running git.

A task's `base_commit` must be known when the task is generated, long before an image builder
makes the repository. Git ids are content hashes, so a commit made from the same files with a
fixed author, committer, dates and message always has the same id; this module computes that id
and `snapshot.commit_snapshot` makes the real commit (and checks the two agree).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["SNAPSHOT_IDENTITY", "CommitIdentity", "blob_id", "commit_id", "tree_id"]

_FILE_MODE = b"100644"
_TREE_MODE = b"40000"


@dataclass(frozen=True, slots=True)
class CommitIdentity:
    """Author, committer, date and message of a deterministic snapshot commit.

    `timestamp_s` is seconds since the epoch (UTC); the same identity is used for author and
    committer so that `git log` shows nothing beyond one plain commit.
    """

    name: str
    email: str
    timestamp_s: int
    message: str

    @property
    def git_date(self) -> str:
        """The date in git's internal format, as `GIT_AUTHOR_DATE` accepts it."""
        return f"{self.timestamp_s} +0000"

    def git_env(self) -> dict[str, str]:
        """Environment variables that make `git commit` use this identity."""
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_AUTHOR_DATE": self.git_date,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
            "GIT_COMMITTER_DATE": self.git_date,
        }


SNAPSHOT_IDENTITY = CommitIdentity(
    name="swe-taskset",
    email="swe-taskset@example.invalid",
    timestamp_s=1_767_225_600,  # 2026-01-01T00:00:00Z: fixed so commit ids are reproducible
    message="Initial commit\n",
)
"""The identity of every squashed snapshot commit of the shipped task set."""


def blob_id(content: bytes) -> str:
    """The git object id of a file with `content`."""
    return _object_id(b"blob", content)


def tree_id(files: Mapping[str, bytes]) -> str:
    """The git tree id of `files` (POSIX relative path -> content), all as mode 100644.

    Raises:
        ValueError: a path is absolute, empty, or has an empty or `.`/`..` component.
    """
    nested: dict[str, object] = {}
    for path, content in files.items():
        parts = path.split("/")
        if not path or any(part in {"", ".", ".."} for part in parts):
            raise ValueError(f"snapshot path {path!r} must be a relative POSIX path")
        node = nested
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"snapshot path {path!r} goes through the file {part!r}")
            node = child
        node[parts[-1]] = content
    return _tree_object_id(nested)


def commit_id(tree: str, identity: CommitIdentity = SNAPSHOT_IDENTITY) -> str:
    """The id of a root commit (no parent) of `tree` made with `identity`."""
    person = f"{identity.name} <{identity.email}> {identity.git_date}"
    body = f"tree {tree}\nauthor {person}\ncommitter {person}\n\n{identity.message}"
    return _object_id(b"commit", body.encode("utf-8"))


def _tree_object_id(nested: Mapping[str, object]) -> str:
    # Git sorts tree entries by name, comparing a subtree's name as if it ended in "/".
    def sort_key(name: str) -> bytes:
        suffix = b"/" if isinstance(nested[name], dict) else b""
        return name.encode("utf-8") + suffix

    body = bytearray()
    for name in sorted(nested, key=sort_key):
        child = nested[name]
        if isinstance(child, dict):
            mode, object_hex = _TREE_MODE, _tree_object_id(child)
        else:
            assert isinstance(child, bytes)
            mode, object_hex = _FILE_MODE, blob_id(child)
        body += mode + b" " + name.encode("utf-8") + b"\0" + bytes.fromhex(object_hex)
    return _object_id(b"tree", bytes(body))


def _object_id(kind: bytes, body: bytes) -> str:
    header = kind + b" " + str(len(body)).encode("ascii") + b"\0"
    return hashlib.sha1(header + body, usedforsecurity=False).hexdigest()
