"""The report the grader's pytest launcher writes (`grading_assets/launch_pytest.py`).

Read from a file outside the repository's tracked tree, it gives every test's outcome by node
id, the tests collected, pytest's own exit status and the file pytest was imported from, so the
grade need not rest on the log alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RunReport", "parse_run_report"]


@dataclass(frozen=True, slots=True)
class RunReport:
    """One pytest run as the launcher saw it."""

    runner_file: str
    pytest_version: str
    exitstatus: int
    tests: Mapping[str, str]
    repo_root: str = ""
    """The repository's real path as the run saw it (the runner must not come from there)."""
    collected: tuple[str, ...] | None = None
    """Every test the run collected and selected (collection errors included), before a
    `run_only` filter; None from a launcher that does not say."""


def parse_run_report(raw: bytes) -> RunReport | None:
    """The report, or None when it is not the launcher's JSON (missing fields, wrong types)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    tests = data.get("tests")
    if not isinstance(tests, dict):
        return None
    fields_ok = (
        isinstance(data.get("runner_file"), str)
        and isinstance(data.get("pytest_version"), str)
        and isinstance(data.get("exitstatus"), int)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in tests.items())
    )
    if not fields_ok:
        return None
    repo_root = data.get("repo_root", "")
    collected = data.get("collected")
    if not (isinstance(collected, list) and all(isinstance(i, str) for i in collected)):
        collected = None
    return RunReport(
        data["runner_file"],
        data["pytest_version"],
        data["exitstatus"],
        dict(tests),
        repo_root if isinstance(repo_root, str) else "",
        None if collected is None else tuple(collected),
    )
