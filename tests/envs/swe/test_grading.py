"""The grading decision (pure): which logs resolve a task, which are untrusted, which are infra."""

from __future__ import annotations

import json

import pytest

from envs.swe.config import GradingConfig
from envs.swe.grading import (
    GradingInputs,
    GradingReport,
    InfraError,
    grade,
    is_test_path,
    paths_in_patch,
)
from envs.swe.grading_log import parse_pytest_log

F2P = "tests/test_ops.py::test_add"
P2P = "tests/test_ops.py::test_mul"
HEADER = "============================= test session starts =============================="
COLLECTED = "collected 2 items"
SUMMARY_HEADER = "=========================== short test summary info ============================"


def pytest_output(*outcome_lines: str, summary: str = "2 passed in 0.01s") -> str:
    return "\n".join(
        [HEADER, COLLECTED, "", "tests/test_ops.py ..", "", SUMMARY_HEADER, *outcome_lines,
         f"========================= {summary} =========================="]
    )  # fmt: skip


def decide(
    text: str, exit_code: int | None = 0, config: GradingConfig | None = None, **fields: object
) -> GradingReport:
    inputs = GradingInputs(
        instance_id="tiny__calc-1", fail_to_pass=(F2P,), pass_to_pass=(P2P,), log=text,
        exit_code=exit_code, **fields,  # type: ignore[arg-type]
    )  # fmt: skip
    return grade(inputs, config or GradingConfig(), parse_pytest_log)


ALL_PASS = pytest_output(f"PASSED {P2P}", f"PASSED {F2P}")


def test_all_required_tests_passing_resolves_with_reward_1() -> None:
    report = decide(ALL_PASS, 0)
    assert report.resolved and report.reward == 1.0
    assert report.f2p_passed == (F2P,) and report.p2p_passed == (P2P,)
    assert report.invalid_reason is None and report.infra_error is None


def test_xfail_counts_as_passing() -> None:
    body = pytest_output(
        f"PASSED {P2P}", f"XFAIL {F2P} - known", summary="1 passed, 1 xfailed in 0.1s"
    )
    assert decide(body, 0).resolved


@pytest.mark.parametrize(
    ("outcome_lines", "exit_code", "f2p_failed", "p2p_failed"),
    [
        ((f"PASSED {P2P}",), 0, (F2P,), ()),  # F2P missing from the log
        ((f"PASSED {P2P}", f"FAILED {F2P} - assert -1 == 5"), 1, (F2P,), ()),
        ((f"FAILED {P2P} - boom", f"PASSED {F2P}"), 1, (), (P2P,)),
        ((f"ERROR {P2P} - fixture", f"PASSED {F2P}"), 1, (), (P2P,)),
        ((f"SKIPPED {F2P}", f"PASSED {P2P}"), 0, (F2P,), ()),
    ],
)
def test_any_required_test_not_passing_gives_reward_0(
    outcome_lines: tuple[str, ...], exit_code: int, f2p_failed: tuple[str, ...],
    p2p_failed: tuple[str, ...],
) -> None:  # fmt: skip
    report = decide(pytest_output(*outcome_lines), exit_code)
    assert not report.resolved and report.reward == 0.0
    assert (report.f2p_failed, report.p2p_failed) == (f2p_failed, p2p_failed)
    assert report.infra_error is None


def test_non_zero_exit_without_any_failure_in_the_log_is_untrusted() -> None:
    report = decide(ALL_PASS, 1)
    assert not report.resolved and report.invalid_reason == "exit_code_mismatch"


@pytest.mark.parametrize(
    "body",
    [
        f"PASSED {P2P}\nPASSED {F2P}",  # outcome lines only: printed, not run
        "\n".join([SUMMARY_HEADER, f"PASSED {P2P}", f"PASSED {F2P}", "== 2 passed in 0.1s =="]),
        "\n".join([HEADER, COLLECTED, SUMMARY_HEADER, f"PASSED {P2P}", f"PASSED {F2P}"]),
    ],
)
def test_a_log_without_evidence_that_the_suite_ran_is_untrusted(body: str) -> None:
    report = decide(body, 0)
    assert not report.resolved and report.invalid_reason == "suite_not_run"


def test_a_required_test_reported_failing_anywhere_fails_even_if_also_printed_passed() -> None:
    real = pytest_output(f"PASSED {P2P}", f"FAILED {F2P} - assert")
    forged = "\n".join([SUMMARY_HEADER, f"PASSED {F2P}"])  # printed after the real summary
    report = decide(real + "\n" + forged, 0)
    assert not report.resolved and F2P in report.f2p_failed


def test_a_log_with_two_summary_headers_is_untrusted() -> None:
    forged = pytest_output(f"PASSED {P2P}", f"PASSED {F2P}")
    report = decide(ALL_PASS + "\n" + forged, 0)
    assert not report.resolved and report.invalid_reason == "multiple_summaries"


def test_tests_killed_by_the_timeout_give_reward_0() -> None:
    report = decide(ALL_PASS, 124, test_duration_s=900.0)
    assert not report.resolved and report.invalid_reason == "tests_timed_out"
    assert report.infra_error is None and report.fault == "agent"


def test_tests_killed_by_the_timeout_can_be_counted_as_infra() -> None:
    config = GradingConfig(tests_timeout_is_infra_error=True)
    report = decide(ALL_PASS, 137, config, test_duration_s=900.0)
    assert report.infra_error is not None and report.infra_error.code == "tests_timed_out"


def test_a_kill_before_the_deadline_is_the_patchs_doing_not_a_timeout() -> None:
    """`os.kill(-1, 9)` in the code under test ends the run with 137 long before the deadline:
    reward 0 as the agent's, never an infra error that would be retried."""
    config = GradingConfig(tests_timeout_is_infra_error=True)
    report = decide("", 137, config, test_duration_s=0.4)
    assert not report.resolved and report.infra_error is None and report.fault == "agent"


def test_a_run_without_an_exit_code_is_an_infra_error_not_a_zero() -> None:
    report = decide(ALL_PASS, None)
    assert not report.resolved and report.invalid_reason is None and report.fault == "infra"
    assert report.infra_error is not None and report.infra_error.code == "no_exit_code"


def test_an_infra_error_from_the_grading_io_is_reported_as_is() -> None:
    infra = InfraError("image_missing", "image 'x' does not exist")
    report = decide("", infra_error=infra)
    assert report.infra_error == infra and not report.resolved
    assert report.f2p_failed == (F2P,) and report.p2p_failed == (P2P,)


def test_a_patch_that_did_not_apply_gives_reward_0() -> None:
    report = decide("", patch_error="patch_apply_failed")
    assert report.invalid_reason == "patch_apply_failed" and report.infra_error is None


def test_an_empty_requirement_list_needs_only_a_trusted_run() -> None:
    inputs = GradingInputs("t", (), (), log=ALL_PASS, exit_code=0)
    assert grade(inputs, GradingConfig(), parse_pytest_log).resolved


def test_report_is_json_ready() -> None:
    report = decide(ALL_PASS, 0)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["resolved"] is True and data["statuses"][F2P] == "PASSED"
    assert data["log_tail"].endswith(ALL_PASS[-40:]) and data["fault"] is None


# -- which changes count as test changes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "is_test"),
    [
        ("conftest.py", True),
        ("pkg/sub/conftest.py", True),
        ("test_ops.py", True),
        ("pkg/test_ops.py", True),
        ("pkg/ops_test.py", True),
        ("tests/data/fixture.json", True),
        ("src/pkg/tests/helpers.py", True),
        ("pytest.ini", True),
        ("sitecustomize.py", True),
        ("docs/hidden_spec.txt", True),  # listed by the task as a test file
        ("calc/ops.py", False),
        ("calc/testing_utils.py", False),
        ("contest.py", False),
        ("latest_tests.py", False),
    ],
)
def test_test_paths_are_recognised(path: str, is_test: bool) -> None:
    config = GradingConfig()
    assert is_test_path(path, ["docs/hidden_spec.txt"], config.test_path_patterns) is is_test


def test_paths_in_patch_lists_every_file_a_diff_touches() -> None:
    patch = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n"
        "+++ b/tests/test_a.py\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/old.py b/new.py\nrename from old.py\nrename to new.py\n"
    )
    assert paths_in_patch(patch) == ["tests/test_a.py", "old.py", "new.py"]
