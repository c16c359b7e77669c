"""The hardened grading decision (pure): log, launcher report, exit code and canaries must agree;
two verdicts must agree."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envs.swe.canary import Canary
from envs.swe.config import GradingConfig
from envs.swe.grading import GradingInputs, GradingReport, InfraError, combine_verdicts, grade
from envs.swe.grading_log import parse_pytest_log
from envs.swe.run_report import RunReport, parse_run_report

F2P = "tests/test_ops.py::test_add"
P2P = "tests/test_ops.py::test_mul"
PASS_ID = "tests/test_ops.py::test_mul_keeps_order"
FAIL_ID = "tests/test_ops.py::test_add_large_value"
CANARY = Canary("c0ffee", PASS_ID, FAIL_ID, ".git/conductor/c0ffee/canary-c0ffee.out")
RUNNER = "/usr/lib/python3/dist-packages/pytest/__init__.py"


def pytest_log(statuses: dict[str, str]) -> str:
    lines = [f"{status} {test_id}" for test_id, status in statuses.items()]
    return "\n".join(
        ["=========== test session starts ===========", f"collected {len(lines)} items", "",
         "=========== short test summary info ===========", *lines,
         "=========== 1 failed, 3 passed in 0.05s ==========="]
    )  # fmt: skip


GENUINE = {P2P: "PASSED", F2P: "PASSED", PASS_ID: "PASSED", FAIL_ID: "FAILED"}


def inputs(
    log_statuses: dict[str, str] = GENUINE,
    report_statuses: dict[str, str] | None = GENUINE,
    *,
    exit_code: int = 1,
    exitstatus: int | None = None,
    runner: str = RUNNER,
    canary_output: str | None = CANARY.expected_output,
) -> GradingInputs:
    report = None
    if report_statuses is not None:
        status = exit_code if exitstatus is None else exitstatus
        report = RunReport(runner, "7.2.1", status, report_statuses)
    return GradingInputs(
        instance_id="tiny__calc-1", fail_to_pass=(F2P,), pass_to_pass=(P2P,),
        log=pytest_log(log_statuses), exit_code=exit_code, hardened=True, run_report=report,
        canary=CANARY, canary_output=canary_output,
    )  # fmt: skip


def decide(grading_inputs: GradingInputs) -> GradingReport:
    return grade(grading_inputs, GradingConfig(), parse_pytest_log)


def test_a_genuine_hardened_run_resolves() -> None:
    report = decide(inputs())
    assert report.resolved and report.hardened and not report.tampered, report.invalid_reason
    assert set(report.statuses) == {F2P, P2P}  # the canaries are not the task's tests


def test_a_genuine_run_with_a_failing_required_test_is_unresolved_not_tampered() -> None:
    failing = {**GENUINE, F2P: "FAILED"}
    report = decide(inputs(failing, failing))
    assert not report.resolved and not report.tampered and report.f2p_failed == (F2P,)


@pytest.mark.parametrize(
    ("grading_inputs", "reason"),
    [
        (inputs(exit_code=0, report_statuses=None), "wrote no report"),
        (inputs(runner="/testbed/pytest.py"), "imported from the repository"),
        (inputs(exit_code=1, exitstatus=0), "exit status"),
        (inputs(report_statuses={**GENUINE, F2P: "FAILED"}), "disagree on"),
        (inputs(log_statuses={**GENUINE, F2P: "FAILED"}), "disagree on"),
        (inputs(log_statuses={**GENUINE, FAIL_ID: "PASSED"}), "must fail"),
        (inputs(report_statuses={**GENUINE, FAIL_ID: "PASSED"}), "must fail"),
        (inputs(report_statuses={**GENUINE, PASS_ID: "SKIPPED"}), "must pass"),
        (inputs(canary_output=None), "did not run its body"),
        (inputs(canary_output="0" * 64), "did not run its body"),
        (inputs(exit_code=0), "exit code 0 although a test failed"),
        (
            inputs({P2P: "PASSED", F2P: "PASSED"}, {P2P: "PASSED", F2P: "PASSED"}, exit_code=0),
            "must fail",
        ),
    ],
)
def test_a_tampered_run_scores_0_and_says_so(grading_inputs: GradingInputs, reason: str) -> None:
    report = decide(grading_inputs)
    assert not report.resolved and report.tampered and report.fault == "agent"
    assert report.infra_error is None
    assert report.invalid_reason is not None and report.invalid_reason.startswith("tampered:")
    assert reason in report.invalid_reason


def test_a_run_that_stopped_early_on_a_real_failure_is_not_called_tampered() -> None:
    """`-x` stops before the canaries, which run last: the real failure decides."""
    stopped = {P2P: "PASSED", F2P: "FAILED"}
    report = decide(inputs(stopped, stopped, canary_output=None))
    assert not report.resolved and not report.tampered and report.f2p_failed == (F2P,)


def test_a_killed_run_without_a_report_is_the_agents_zero() -> None:
    report = decide(inputs(report_statuses=None, exit_code=137))
    assert not report.resolved and not report.tampered and report.infra_error is None
    assert report.invalid_reason is not None and "suite_not_completed" in report.invalid_reason


def test_an_unhardened_run_needs_no_report() -> None:
    plain = replace(inputs(report_statuses=None, exit_code=1), hardened=False, canary=None)
    assert decide(plain).resolved  # the fail canary's FAILED line explains exit 1


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b"[]", b'{"runner_file": 1}', b'{"runner_file": "x", "pytest_version": '
     b'"7", "exitstatus": 0, "tests": {"a": 1}}', b"\xff\xfe"],
)  # fmt: skip
def test_a_malformed_run_report_reads_as_none(raw: bytes) -> None:
    assert parse_run_report(raw) is None


def test_a_run_report_round_trips() -> None:
    raw = b'{"runner_file": "/x", "pytest_version": "8.1", "exitstatus": 1, '
    raw += b'"tests": {"a": "FAILED"}}'
    assert parse_run_report(raw) == RunReport("/x", "8.1", 1, {"a": "FAILED"})


def _verdict(resolved: bool, **fields: object) -> GradingReport:
    return GradingReport(instance_id="tiny__calc-1", resolved=resolved, **fields)  # type: ignore[arg-type]


def test_two_resolved_verdicts_over_the_same_tests_resolve() -> None:
    final = combine_verdicts(
        _verdict(True), _verdict(True), reported={F2P, P2P}, collected={P2P, F2P}
    )
    assert final.resolved and final.second_verdict is not None
    assert final.second_verdict["resolved"]


def test_a_second_verdict_that_fails_makes_the_reward_0_as_the_agents_fault() -> None:
    final = combine_verdicts(_verdict(True), _verdict(False, f2p_failed=(F2P,)))
    assert not final.resolved and final.fault == "agent" and not final.tampered
    assert final.invalid_reason is not None and final.invalid_reason.startswith("verdicts_disagree")
    assert F2P in final.invalid_reason


def test_a_second_verdict_that_saw_tampering_says_so() -> None:
    second = _verdict(False, tampered=True, invalid_reason="tampered: the canary ...")
    final = combine_verdicts(_verdict(True), second)
    assert not final.resolved and final.tampered
    assert final.invalid_reason == "verdicts_disagree: tampered: the canary ..."


def test_a_void_second_verdict_voids_the_grade() -> None:
    error = InfraError("grading_sandbox_died", "gone")
    final = combine_verdicts(_verdict(True), _verdict(False, infra_error=error))
    assert not final.resolved and final.fault == "infra" and final.infra_error == error


@pytest.mark.parametrize(
    ("reported", "collected"),
    [({F2P, P2P}, {F2P}), ({F2P}, {F2P, P2P}), ({F2P, "tests/test_ops.py::test_x"}, {F2P, P2P})],
)
def test_a_run_that_reported_other_tests_than_an_untouched_runner_collects_is_tampered(
    reported: set[str], collected: set[str]
) -> None:
    final = combine_verdicts(_verdict(True), _verdict(True), reported=reported, collected=collected)
    assert not final.resolved and final.tampered
    assert final.invalid_reason is not None and "untouched runner collects" in final.invalid_reason


def test_an_unresolved_first_verdict_stays_as_it_was() -> None:
    first = _verdict(False, f2p_failed=(F2P,))
    final = combine_verdicts(first, _verdict(True), reported={F2P}, collected={P2P})
    assert not final.resolved and final.invalid_reason is None and not final.tampered
