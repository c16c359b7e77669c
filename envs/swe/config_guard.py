"""Which configuration files a patch may not change, because they load code into the test run.

`pytest.ini`, `tox.ini`, `conftest.py` and friends are protected by path (the grader restores
them). `pyproject.toml` and `setup.cfg` hold much more than pytest's settings, so they are
restored only when the patch changed their pytest section (`addopts = -p plugin`,
`pythonpath`, `python_files`, `required_plugins`, ...); a fix that bumps a version number keeps
its change. Pure: the grader reads both versions of the file and asks here.

A reader that sees a file differently from pytest defeats such a guard, so a changed file that
configures Python or pytest is refused outright (`config_file_problem`) when it is a symlink
(pytest follows it, a reader of regular files does not) or breaks lines anywhere but at `\n` /
`\r\n` (`str.splitlines` and universal newlines split at a lone `\r`, `\f`, NEL, U+2028...;
configparser and TOML do not). The guard's own readers then see what pytest sees. (pytest itself
reads only the grader's pristine copy of its configuration; this is the second line.)
"""

from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import PurePosixPath
from typing import Any

__all__ = ["SECTIONED_CONFIG_NAMES", "config_file_problem", "pytest_settings_changed"]

SECTIONED_CONFIG_NAMES = frozenset({"pyproject.toml", "setup.cfg"})
"""Files whose pytest section is guarded (the rest of the file is the patch's to change)."""

_UNREADABLE = object()
# Line breaks other than LF and CRLF, as str.splitlines and universal newlines know them.
_ODD_LINE_BREAKS = re.compile(r"\r(?!\n)|[\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def config_file_problem(
    path: str, *, is_symlink: bool, patched: bytes | None, base: bytes | None
) -> str | None:
    """Why the patched `path` (a file that configures Python or pytest) is refused, or None.

    Refused: a symlink, and odd line breaks the base version did not already have (so a repo
    that always had a form feed in its setup.py is not refused for keeping it).
    """
    if is_symlink:
        return f"{path} is a symlink (pytest would read what it points to)"
    if patched is None:
        return None
    added = _odd_line_breaks(patched) - _odd_line_breaks(base or b"")
    if added > 0:
        return (
            f"{path} breaks lines at characters other than LF and CRLF (pytest's reader and "
            "Python's configparser would disagree on its lines)"
        )
    return None


def _odd_line_breaks(raw: bytes) -> int:
    return len(_ODD_LINE_BREAKS.findall(raw.decode("utf-8", "replace")))


def pytest_settings_changed(path: str, base: bytes | None, patched: bytes | None) -> bool:
    """Whether the patch changed pytest's settings in `path` (base/patched None: file absent).

    A file the patch made unparsable counts as changed: pytest may read it differently from us.
    """
    name = PurePosixPath(path).name
    if name not in SECTIONED_CONFIG_NAMES:
        return False
    reader = _pyproject_section if name == "pyproject.toml" else _setup_cfg_section
    before = reader(base)
    after = reader(patched)
    return after is _UNREADABLE or before != after


def _pyproject_section(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return _UNREADABLE
    tool = data.get("tool")
    return tool.get("pytest") if isinstance(tool, dict) else None


def _setup_cfg_section(raw: bytes | None) -> Any:
    if raw is None:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(raw.decode("utf-8"))
    except (UnicodeDecodeError, configparser.Error):
        return _UNREADABLE
    sections = {
        section: dict(parser.items(section))
        for section in ("tool:pytest", "pytest")
        if parser.has_section(section)
    }
    return sections or None  # no pytest section: the same as no file, for pytest
