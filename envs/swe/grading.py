"""The grading decision: from a test run to a `GradingReport` (pure; the I/O is in `grader.py`).

Rules (SWE-bench's, plus the swebench 5.0.2 anti-spoof checks, see reference/swe-envs.md §1.5,
plus tamper detection; `docs/swe.md` lists what is defended and what is not):

* resolved iff every FAIL_TO_PASS and every PASS_TO_PASS test passed (PASSED or XFAIL); a test
  missing from the log counts as failed; a required test with a failing line anywhere in the
  test output counts as failed, whatever other lines say (a patch can print "PASSED" lines);
* the test command's exit code comes from the sandbox's exec, not from the log (nothing in the
  log, which the code under test writes, decides the exit code);
* a hardened run (a pytest command run through the grader's launcher) must also agree with the
  launcher's own report: the runner was not imported from the repository, pytest's exit status
  is the exit code, every required test passes in the report *and* in the log, the pass canary
  passed and left its side effect and the fail canary failed. Anything else is `tampered`
  (reward 0, `tampered` true, the reason in `invalid_reason`);
* the log is not trusted (reward 0, `invalid_reason` says why) when: the exit code is non-zero
  but no test FAILED or ERRORed (unhardened runs); there is no sign the suite started or
  finished; pytest's summary header appears twice; the tests were killed by the timeout; the
  patch did not apply or could not be extracted;
* a changed file that configures Python or pytest and is a symlink or breaks lines at anything
  but LF / CRLF is refused (`tampered`, reward 0): readers would disagree on what it says;
* two verdicts must agree (`combine_verdicts`): when the first run resolves, the FAIL_TO_PASS
  tests are re-run in a second fresh sandbox from pristine test files with only the patch's
  non-test source changes applied (`source_patch`). Reward 1 only if that run resolves them too
  (else `verdicts_disagree`) and, for hardened runs, the tests the first run reported are
  exactly the tests the second run's untouched runner collected (else `tampered`);
* failures of the grading machinery itself are `InfraError`s, never a reward of 0: the rollout
  layer drops or retries those samples instead of training on them. Everything the patch or the
  agent could have caused is the agent's (`fault`), never an infra error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol

from envs.swe.canary import Canary
from envs.swe.config import GradingConfig
from envs.swe.grading_log import FAILING_STATUSES, PASSING_STATUSES
from envs.swe.run_report import RunReport

__all__ = [
    "EpisodeTask",
    "GradableTask",
    "GradingInputs",
    "GradingReport",
    "InfraError",
    "LogParser",
    "combine_verdicts",
    "grade",
    "is_test_path",
    "paths_in_patch",
]

LogParser = Callable[[str], Mapping[str, str]]
"""Parses a test log into `{test_id: status}` (e.g. `envs.swe.grading_log.parse_pytest_log`)."""

_PASSING: frozenset[str] = frozenset(str(status) for status in PASSING_STATUSES)
_FAILING: frozenset[str] = frozenset(str(status) for status in FAILING_STATUSES)
_DIFF_HEADER = re.compile(r"^diff --git a/(.+?) b/(.+)$", re.MULTILINE)
_FILE_HEADER = re.compile(r"^(?:---|\+\+\+) (?:[ab]/)?(.+?)\t?$", re.MULTILINE)
_EMPTY_STATUSES: Mapping[str, str] = MappingProxyType({})


class GradableTask(Protocol):
    """What grading needs from a task (the fields of `envs.swe.tasks.SWETask`)."""

    @property
    def instance_id(self) -> str: ...
    @property
    def base_commit(self) -> str: ...
    @property
    def test_patch(self) -> str: ...
    @property
    def test_command(self) -> str:
        """The full test command (with the test files as directives), run at the repo root."""
        ...

    @property
    def test_files(self) -> Sequence[str]: ...
    @property
    def test_env_setup(self) -> str:
        """Shell lines run before the test command (environment activation); may be empty."""
        ...

    @property
    def FAIL_TO_PASS(self) -> Sequence[str]: ...
    @property
    def PASS_TO_PASS(self) -> Sequence[str]: ...


class EpisodeTask(GradableTask, Protocol):
    """What an episode needs from a task: what grading needs, and the problem statement."""

    @property
    def problem_statement(self) -> str: ...


@dataclass(frozen=True, slots=True)
class InfraError:
    """Grading could not be done (not the patch's fault). `code` is short and stable."""

    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class GradingInputs:
    """Everything the decision looks at. `patch_error` is why the patch was not tested.

    `exit_code` is the test command's, from the exec; `hardened` says the run went through the
    launcher, whose `run_report` (None: none was written), `canary` and the pass canary's
    `canary_output` (None: not written) are then checked. `config_refused` says why a changed
    configuration file was refused (the tests were not run); `pristine_config` that pytest read
    only the grader's pristine copy of its configuration.
    """

    instance_id: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    log: str = ""
    exit_code: int | None = None
    test_duration_s: float = 0.0
    hardened: bool = False
    run_report: RunReport | None = None
    canary: Canary | None = None
    canary_output: str | None = None
    config_refused: str | None = None
    pristine_config: bool = False
    workdir: str = "/testbed"
    patch_error: str | None = None
    apply_method: str = ""
    discarded_paths: tuple[str, ...] = ()
    infra_error: InfraError | None = None
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class GradingReport:
    """The outcome of grading one patch. `reward` is 1.0 only when `resolved`.

    `infra_error` set means the grade is void (drop the sample); `invalid_reason` set means the
    tests were not run or their log was not trusted, which is the patch's fault (reward 0);
    `tampered` means the run showed signs of tampering (a reason starting `tampered:`).
    `second_verdict` summarises the re-run of `combine_verdicts` (None: it did not run).
    """

    instance_id: str
    resolved: bool
    statuses: Mapping[str, str] = field(default_factory=lambda: _EMPTY_STATUSES)
    f2p_passed: tuple[str, ...] = ()
    f2p_failed: tuple[str, ...] = ()
    p2p_passed: tuple[str, ...] = ()
    p2p_failed: tuple[str, ...] = ()
    infra_error: InfraError | None = None
    invalid_reason: str | None = None
    test_exit_code: int | None = None
    apply_method: str = ""
    discarded_paths: tuple[str, ...] = ()
    duration_s: float = 0.0
    log_tail: str = ""
    tampered: bool = False
    hardened: bool = False
    pristine_config: bool = False
    second_verdict: Mapping[str, Any] | None = None

    @property
    def reward(self) -> float:
        return 1.0 if self.resolved else 0.0

    @property
    def fault(self) -> str | None:
        """Who a reward of 0 is on: `infra` (void, retried), `agent` (trained on), or None."""
        if self.infra_error is not None:
            return "infra"
        return None if self.resolved else "agent"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for `info["grading"]` and trajectories)."""
        return {
            "instance_id": self.instance_id,
            "resolved": self.resolved,
            "reward": self.reward,
            "statuses": dict(self.statuses),
            "f2p_passed": list(self.f2p_passed),
            "f2p_failed": list(self.f2p_failed),
            "p2p_passed": list(self.p2p_passed),
            "p2p_failed": list(self.p2p_failed),
            "infra_error": None if self.infra_error is None else self.infra_error.to_dict(),
            "invalid_reason": self.invalid_reason,
            "test_exit_code": self.test_exit_code,
            "apply_method": self.apply_method,
            "discarded_paths": list(self.discarded_paths),
            "duration_s": self.duration_s,
            "log_tail": self.log_tail,
            "tampered": self.tampered,
            "hardened": self.hardened,
            "pristine_config": self.pristine_config,
            "second_verdict": None if self.second_verdict is None else dict(self.second_verdict),
            "fault": self.fault,
        }


def grade(inputs: GradingInputs, config: GradingConfig, parse_log: LogParser) -> GradingReport:
    """Decide whether the patch resolved the task (see the module docstring for the rules)."""
    common: dict[str, Any] = {
        "instance_id": inputs.instance_id,
        "apply_method": inputs.apply_method,
        "discarded_paths": inputs.discarded_paths,
        "duration_s": inputs.duration_s,
        "log_tail": inputs.log[-config.log_tail_chars :] if config.log_tail_chars else "",
        "hardened": inputs.hardened,
        "pristine_config": inputs.pristine_config,
    }
    unresolved = _all_failed(inputs)
    if inputs.infra_error is not None:
        return GradingReport(resolved=False, infra_error=inputs.infra_error, **unresolved, **common)
    if inputs.patch_error is not None:
        return GradingReport(
            resolved=False, invalid_reason=inputs.patch_error, **unresolved, **common
        )
    if inputs.config_refused is not None:
        reason = f"tampered: {inputs.config_refused}"
        return GradingReport(
            resolved=False, invalid_reason=reason, tampered=True, **unresolved, **common
        )
    exit_code = inputs.exit_code
    if exit_code is None:
        error = InfraError("no_exit_code", "the test command reported no exit code")
        return GradingReport(resolved=False, infra_error=error, **unresolved, **common)
    text = inputs.log
    statuses = {test_id: str(status) for test_id, status in parse_log(text).items()}
    _apply_failing_lines(statuses, text, inputs.fail_to_pass + inputs.pass_to_pass, parse_log)
    timed_out = exit_code in config.timeout_exit_codes and (
        inputs.test_duration_s >= config.test_timeout_s
    )
    if timed_out and config.tests_timeout_is_infra_error:
        infra = InfraError("tests_timed_out", f"the test command was killed (exit {exit_code})")
        return GradingReport(
            resolved=False, statuses=statuses, infra_error=infra, test_exit_code=exit_code,
            **_split_outcomes(inputs, statuses), **common,
        )  # fmt: skip
    if timed_out:
        return GradingReport(
            resolved=False, statuses=statuses, invalid_reason="tests_timed_out",
            test_exit_code=exit_code, **_split_outcomes(inputs, statuses), **common,
        )  # fmt: skip
    if inputs.hardened:
        return _grade_hardened(inputs, statuses, exit_code, config, common)
    outcome = _split_outcomes(inputs, statuses)
    invalid = _invalid_reason(text, exit_code, statuses, config)
    resolved = invalid is None and not outcome["f2p_failed"] and not outcome["p2p_failed"]
    return GradingReport(
        resolved=resolved, statuses=statuses, invalid_reason=invalid, test_exit_code=exit_code,
        **outcome, **common,
    )  # fmt: skip


def _grade_hardened(
    inputs: GradingInputs,
    log_statuses: dict[str, str],
    exit_code: int,
    config: GradingConfig,
    common: dict[str, Any],
) -> GradingReport:
    """Log and launcher report must agree, the runner must be the image's, canaries right."""
    report = inputs.run_report
    canary = inputs.canary
    required = inputs.fail_to_pass + inputs.pass_to_pass
    if report is None:
        reason = (
            "tampered: exit code 0 but the test runner wrote no report"
            if exit_code == 0
            else f"suite_not_completed: the test runner wrote no report (exit {exit_code})"
        )
        return GradingReport(
            resolved=False, statuses=log_statuses, invalid_reason=reason,
            test_exit_code=exit_code, tampered=exit_code == 0, **_all_failed(inputs), **common,
        )  # fmt: skip
    statuses = {
        test_id: status
        for test_id, status in report.tests.items()
        if canary is None or not canary.is_canary(test_id)
    }
    both: dict[str, str] = {}
    for test_id in required:
        in_report, in_log = statuses.get(test_id, ""), log_statuses.get(test_id, "")
        both[test_id] = in_report if in_report in _PASSING and in_log in _PASSING else "FAILED"
    outcome = _split_outcomes(inputs, both)
    real_failure = bool(outcome["f2p_failed"] or outcome["p2p_failed"])
    tamper = _tamper_reason(inputs, log_statuses, statuses, exit_code, real_failure=real_failure)
    invalid = tamper or _log_untrusted(inputs.log, config)
    resolved = invalid is None and not real_failure
    return GradingReport(
        resolved=resolved, statuses=statuses, invalid_reason=invalid, test_exit_code=exit_code,
        tampered=tamper is not None, **outcome, **common,
    )  # fmt: skip


def _tamper_reason(
    inputs: GradingInputs,
    log_statuses: Mapping[str, str],
    statuses: Mapping[str, str],
    exit_code: int,
    *,
    real_failure: bool,
) -> str | None:
    """Why this hardened run cannot be trusted, or None. Each check is independent of the trick."""
    report = inputs.run_report
    assert report is not None
    roots = {inputs.workdir.rstrip("/") + "/", report.repo_root.rstrip("/") + "/"} - {"/"}
    if any(report.runner_file.startswith(root) for root in roots):
        return f"tampered: pytest was imported from the repository ({report.runner_file})"
    if report.exitstatus != exit_code:
        status = report.exitstatus
        return f"tampered: pytest's exit status {status} is not the exit code {exit_code}"
    for test_id in inputs.fail_to_pass + inputs.pass_to_pass:
        in_report = statuses.get(test_id, "") in _PASSING
        in_log = log_statuses.get(test_id, "") in _PASSING
        if in_report != in_log:
            return f"tampered: the log and the runner's report disagree on {test_id}"
    canary = inputs.canary
    if canary is None:
        return None
    passed = report.tests.get(canary.pass_id)
    failed = report.tests.get(canary.fail_id)
    if passed is None and failed is None and real_failure:
        return None  # the run stopped early (a crash, an interrupt) on a real failure
    if failed not in _FAILING or log_statuses.get(canary.fail_id) not in _FAILING:
        return "tampered: the canary test that must fail did not fail"
    if passed not in _PASSING or log_statuses.get(canary.pass_id) not in _PASSING:
        return "tampered: the canary test that must pass did not pass"
    if inputs.canary_output != canary.expected_output:
        return "tampered: the passing canary test did not run its body"
    if exit_code == 0:
        return "tampered: exit code 0 although a test failed"
    return None


def combine_verdicts(
    first: GradingReport,
    second: GradingReport,
    *,
    reported: Iterable[str] | None = None,
    collected: Iterable[str] | None = None,
) -> GradingReport:
    """The final report from the first verdict and the second (the FAIL_TO_PASS re-run with
    only the patch's non-test source changes, from pristine test files, in a fresh sandbox).

    Reward 1 only when both resolve and, when both runs were hardened, `reported` (the task
    tests the first run's report names) equals `collected` (the task tests the second run's
    untouched runner collected), canaries left out of both. A void second verdict voids the
    grade (retried); a second verdict that does not resolve makes the reward 0, the agent's.
    """
    summary = {
        "resolved": second.resolved,
        "invalid_reason": second.invalid_reason,
        "f2p_failed": list(second.f2p_failed),
        "dropped_paths": list(second.discarded_paths),
        "tampered": second.tampered,
        "infra_error": None if second.infra_error is None else second.infra_error.to_dict(),
        "duration_s": second.duration_s,
    }
    combined = replace(first, second_verdict=summary)
    if not first.resolved:
        return combined
    if second.infra_error is not None:
        return replace(combined, resolved=False, infra_error=second.infra_error)
    if not second.resolved:
        why = second.invalid_reason or (
            "FAIL_TO_PASS tests failed with only the patch's non-test source changes: "
            + ", ".join(second.f2p_failed)
        )
        return replace(
            combined, resolved=False, tampered=second.tampered,
            invalid_reason=f"verdicts_disagree: {why}",
        )  # fmt: skip
    if reported is not None and collected is not None:
        mismatch = _set_mismatch(set(reported), set(collected))
        if mismatch is not None:
            return replace(combined, resolved=False, tampered=True, invalid_reason=mismatch)
    return combined


def _set_mismatch(reported: set[str], collected: set[str]) -> str | None:
    if reported == collected:
        return None
    missing = sorted(collected - reported)[:3]
    extra = sorted(reported - collected)[:3]
    return (
        f"tampered: the run reported {len(reported)} tests, an untouched runner collects "
        f"{len(collected)} (not reported: {missing}, not collected: {extra})"
    )


def is_test_path(path: str, test_files: Iterable[str], patterns: Iterable[str]) -> bool:
    """Whether a change to `path` must be dropped from the agent's patch."""
    normalized = path.strip("/")
    if normalized in {test_file.strip("/") for test_file in test_files}:
        return True
    return any(_glob_regex(pattern).fullmatch(normalized) for pattern in patterns)


def paths_in_patch(patch: str) -> list[str]:
    """The repository paths a unified diff touches (both sides of renames), in order."""
    paths: list[str] = []
    for match in _DIFF_HEADER.finditer(patch):
        paths.extend(match.groups())
    if not paths:
        paths = [path for path in _FILE_HEADER.findall(patch) if path != "/dev/null"]
    return list(dict.fromkeys(paths))


# -- internals -----------------------------------------------------------------------------------


def _apply_failing_lines(
    statuses: dict[str, str], text: str, required: Sequence[str], parse_log: LogParser
) -> None:
    """Mark a required test failed if any single line of the output reports it failing."""
    wanted = set(required)
    for line in text.splitlines():
        for test_id, status in parse_log(line).items():
            if test_id in wanted and str(status) in _FAILING:
                statuses[test_id] = str(status)


def _split_outcomes(inputs: GradingInputs, statuses: Mapping[str, str]) -> dict[str, Any]:
    def passed(test_id: str) -> bool:
        return str(statuses.get(test_id, "")) in _PASSING

    return {
        "f2p_passed": tuple(t for t in inputs.fail_to_pass if passed(t)),
        "f2p_failed": tuple(t for t in inputs.fail_to_pass if not passed(t)),
        "p2p_passed": tuple(t for t in inputs.pass_to_pass if passed(t)),
        "p2p_failed": tuple(t for t in inputs.pass_to_pass if not passed(t)),
    }


def _all_failed(inputs: GradingInputs) -> dict[str, Any]:
    return {"f2p_failed": inputs.fail_to_pass, "p2p_failed": inputs.pass_to_pass}


def _invalid_reason(
    text: str, exit_code: int, statuses: Mapping[str, str], config: GradingConfig
) -> str | None:
    untrusted = _log_untrusted(text, config)
    if untrusted is not None:
        return untrusted
    any_failing = any(str(status) in _FAILING for status in statuses.values())
    if exit_code != 0 and not any_failing:
        return "exit_code_mismatch"
    return None


def _log_untrusted(text: str, config: GradingConfig) -> str | None:
    if len(re.findall(config.summary_header_pattern, text, re.MULTILINE)) > 1:
        return "multiple_summaries"
    started = any(re.search(p, text, re.MULTILINE) for p in config.suite_started_patterns)
    finished = any(re.search(p, text, re.MULTILINE) for p in config.suite_summary_patterns)
    if not (started and finished):
        return "suite_not_run"
    return None


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A git-style glob: `**/` any leading directories, `/**` anything below, `*` within a name."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("/**", index) and index + 3 == len(pattern):
            out.append("/.*")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif pattern[index] == "*":
            out.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(pattern[index]))
            index += 1
    return re.compile("".join(out))
