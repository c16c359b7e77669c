"""Which configuration files a patch may not change, because they load code into the test run.

`pytest.ini`, `tox.ini`, `conftest.py` and friends are protected by path (the grader restores
them). `pyproject.toml` and `setup.cfg` hold much more than pytest's settings, so they are
restored only when the patch changed their pytest section (`addopts = -p plugin`,
`pythonpath`, `python_files`, `required_plugins`, ...); a fix that bumps a version number keeps
its change. Pure: the grader reads both versions of the file and asks here.
"""

from __future__ import annotations

import configparser
import tomllib
from pathlib import PurePosixPath
from typing import Any

__all__ = ["SECTIONED_CONFIG_NAMES", "pytest_settings_changed"]

SECTIONED_CONFIG_NAMES = frozenset({"pyproject.toml", "setup.cfg"})
"""Files whose pytest section is guarded (the rest of the file is the patch's to change)."""

_UNREADABLE = object()


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
