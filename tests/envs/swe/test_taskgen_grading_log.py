"""The pytest `-rA` summary parser shared by the grader and the task generator."""

from __future__ import annotations

import pytest

from envs.swe.grading_log import TestStatus, parse_pytest_log

# Real pytest 7.2 output (abridged header), covering every outcome line kind.
PYTEST7_LOG = """\
============================= test session starts ==============================
collected 11 items

tests/test_fmt.py .F.F..EsxX.                                            [100%]

==================================== PASSES ====================================
_________________________________ test_pass __________________________________
----------------------------- Captured stdout call -----------------------------
PASSED tests/test_fmt.py::test_fail
=========================== short test summary info ============================
PASSED tests/test_fmt.py::test_pass
PASSED tests/test_fmt.py::test_param[a b]
PASSED tests/test_fmt.py::test_param[[1]]
PASSED tests/test_fmt.py::TestK::test_m
SKIPPED [1] tests/test_fmt.py:20: not now
XFAIL tests/test_fmt.py::test_xfail - known
XPASS tests/test_fmt.py::test_xpass flaky
ERROR tests/test_fmt.py::test_error - RuntimeError: boom
FAILED tests/test_fmt.py::test_fail - AssertionError: numbers differ - really...
FAILED tests/test_fmt.py::test_param[x - y] - AssertionError: assert 'x - y' ...
==== 2 failed, 5 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 error in 0.01s =====
"""


@pytest.fixture(scope="module")
def statuses() -> dict[str, TestStatus]:
    return parse_pytest_log(PYTEST7_LOG)


@pytest.mark.parametrize(
    "test_id, status",
    [
        ("tests/test_fmt.py::test_pass", TestStatus.PASSED),
        ("tests/test_fmt.py::TestK::test_m", TestStatus.PASSED),
        ("tests/test_fmt.py::test_xfail", TestStatus.XFAIL),
        ("tests/test_fmt.py::test_xpass", TestStatus.XPASS),
        ("tests/test_fmt.py::test_error", TestStatus.ERROR),
        ("tests/test_fmt.py::test_fail", TestStatus.FAILED),
    ],
)
def test_each_outcome_line_maps_its_node_id_to_its_status(
    statuses: dict[str, TestStatus], test_id: str, status: TestStatus
) -> None:
    assert statuses[test_id] is status


def test_parametrized_ids_keep_spaces_and_brackets(statuses: dict[str, TestStatus]) -> None:
    assert statuses["tests/test_fmt.py::test_param[a b]"] is TestStatus.PASSED
    assert statuses["tests/test_fmt.py::test_param[[1]]"] is TestStatus.PASSED


def test_message_separator_inside_parameters_is_part_of_the_id(
    statuses: dict[str, TestStatus],
) -> None:
    assert statuses["tests/test_fmt.py::test_param[x - y]"] is TestStatus.FAILED


def test_skipped_line_is_keyed_by_its_location(statuses: dict[str, TestStatus]) -> None:
    assert statuses["tests/test_fmt.py:20"] is TestStatus.SKIPPED


def test_captured_output_before_the_summary_is_ignored(statuses: dict[str, TestStatus]) -> None:
    # The captured "PASSED tests/test_fmt.py::test_fail" line must not mask the real failure.
    assert statuses["tests/test_fmt.py::test_fail"] is TestStatus.FAILED


def test_exactly_the_summary_lines_are_parsed(statuses: dict[str, TestStatus]) -> None:
    assert len(statuses) == 10


def test_collection_error_is_keyed_by_file() -> None:
    log = "=== short test summary info ===\nERROR tests/test_broken.py - ImportError: x\n"
    assert parse_pytest_log(log) == {"tests/test_broken.py": TestStatus.ERROR}


def test_failing_status_wins_over_an_earlier_pass_of_the_same_test() -> None:
    log = "PASSED tests/t.py::test_a\nERROR tests/t.py::test_a - teardown failed\n"
    assert parse_pytest_log(log) == {"tests/t.py::test_a": TestStatus.ERROR}


def test_log_without_summary_header_is_read_whole() -> None:
    assert parse_pytest_log("noise\nPASSED t.py::test_a\n") == {"t.py::test_a": TestStatus.PASSED}


def test_colour_codes_are_stripped() -> None:
    log = "\x1b[32mPASSED\x1b[0m t.py::test_a\n"
    assert parse_pytest_log(log) == {"t.py::test_a": TestStatus.PASSED}


@pytest.mark.parametrize("line", ["PASSED", "PASSEDX t.py::test_a", "passed t.py::test_a", ""])
def test_lines_that_are_not_outcome_lines_are_ignored(line: str) -> None:
    assert parse_pytest_log(line) == {}
