"""Parse the short test summary of a `pytest -rA` run into per-test statuses.

The grader and the task generator both read test outcomes from this one function, so a task's
FAIL_TO_PASS / PASS_TO_PASS lists and the reward use the same test ids. The format follows the
pytest "short test summary info" section (pytest 7 to 9), one outcome per line::

    PASSED tests/test_a.py::test_x[a b]
    FAILED tests/test_a.py::test_y - AssertionError: ...
    ERROR tests/test_b.py - ImportError: ...          (collection error: the id is the file)
    SKIPPED [1] tests/test_a.py:20: reason             (no node id: keyed by "path:line")
    XFAIL tests/test_a.py::test_z - reason
    XPASS tests/test_a.py::test_w reason              (pytest 7 has no " - ")
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = ["FAILING_STATUSES", "PASSING_STATUSES", "TestStatus", "parse_pytest_log"]


class TestStatus(StrEnum):
    """The outcome words pytest prints at the start of a short-summary line."""

    __test__ = False  # not a test class, despite the name

    PASSED = "PASSED"
    FAILED = "FAILED"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"
    XFAIL = "XFAIL"
    XPASS = "XPASS"


PASSING_STATUSES: frozenset[TestStatus] = frozenset({TestStatus.PASSED, TestStatus.XFAIL})
"""Outcomes that count as a pass when grading (as in SWE-bench)."""

FAILING_STATUSES: frozenset[TestStatus] = frozenset({TestStatus.FAILED, TestStatus.ERROR})
"""Outcomes that count as a failure; a test missing from the log also counts as failed."""

_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+\s*$")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_SKIP_LOCATION = re.compile(r"^\[\d+\]\s+(?P<location>.+?:\d+)(?::|$)")
_MESSAGE_SEPARATOR = " - "


def parse_pytest_log(text: str) -> dict[str, TestStatus]:
    """Return `{test_id: status}` for every outcome line of a `pytest -rA` log.

    Only the lines after the last "short test summary info" header are read when the log has
    one (so captured output that merely looks like an outcome line is ignored); otherwise every
    line is read. When one id has several lines (a test that passed but errored in teardown),
    a failing status wins over a passing one. Colour codes are stripped.
    """
    lines = _ANSI_ESCAPE.sub("", text).splitlines()
    headers = [index for index, line in enumerate(lines) if _SUMMARY_HEADER.match(line)]
    start = headers[-1] + 1 if headers else 0
    statuses: dict[str, TestStatus] = {}
    for line in lines[start:]:
        parsed = _parse_line(line)
        if parsed is None:
            continue
        test_id, status = parsed
        previous = statuses.get(test_id)
        if previous is None or previous not in FAILING_STATUSES:
            statuses[test_id] = status
    return statuses


def _parse_line(line: str) -> tuple[str, TestStatus] | None:
    word, _, rest = line.rstrip().partition(" ")
    if word not in TestStatus.__members__ or not rest:
        return None
    status = TestStatus(word)
    if status is TestStatus.SKIPPED:
        match = _SKIP_LOCATION.match(rest)
        if match is not None:
            return match.group("location"), status
    test_id = _node_id(rest)
    return (test_id, status) if test_id else None


def _node_id(rest: str) -> str:
    """Cut the node id off the front of `rest`, which may be followed by a message.

    A node id is `path::name[params]`: the path may hold spaces, the name may not, and the
    parameter part may hold anything, brackets balanced. Without `::` (a collection error)
    the id runs up to the message separator.
    """
    path, sep, name = rest.partition("::")
    if not sep:
        return rest.split(_MESSAGE_SEPARATOR, 1)[0].strip()
    depth = 0
    for index, char in enumerate(name):
        if char == "[":
            depth += 1
        elif char == "]" and depth > 0:
            depth -= 1
        elif char == " " and depth == 0:
            return f"{path}::{name[:index]}"
    return f"{path}::{name}"
