"""Read a project directory into a snapshot (path -> text) and write snapshots back to disk.

A snapshot is the unit the generator works on: the clean project, the buggy project and the
repository the agent sees are all `dict[str, str]` keyed by POSIX paths relative to the root.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath

__all__ = ["IGNORED_NAMES", "is_test_file", "read_project", "split_tests", "write_snapshot"]

IGNORED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".git", ".mypy_cache", ".ruff_cache"})
"""Directory and file names never taken into a snapshot (caches and VCS data)."""


def is_test_file(path: str) -> bool:
    """True for pytest test modules: `test_*.py` or `*_test.py` (pytest's default patterns)."""
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def read_project(root: str | Path) -> dict[str, str]:
    """Every file under `root` as UTF-8 text, keyed by sorted POSIX relative path.

    Raises:
        FileNotFoundError: `root` is not a directory.
        ValueError: a file is not UTF-8 text, or uses CR line endings.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"project directory {root} does not exist")
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part in IGNORED_NAMES for part in relative.parts) or path.suffix == ".pyc":
            continue
        if not path.is_file():
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path} is not UTF-8 text; projects must hold text only") from exc
        if "\r" in text:
            raise ValueError(f"{path} has CR line endings; convert it to LF")
        files[relative.as_posix()] = text
    return files


def write_snapshot(files: Mapping[str, str], root: str | Path) -> None:
    """Write a snapshot under `root` (created if needed), as UTF-8 with LF line endings."""
    root = Path(root)
    for relative, text in sorted(files.items()):
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))


def split_tests(files: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split a snapshot into (non-test files, test files)."""
    sources = {path: text for path, text in files.items() if not is_test_file(path)}
    tests = {path: text for path, text in files.items() if is_test_file(path)}
    return sources, tests
