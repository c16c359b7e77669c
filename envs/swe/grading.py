"""The grading decision: from a test log to a `GradingReport` (pure; the I/O is in `grader.py`).

Rules (SWE-bench's, plus the swebench 5.0.2 anti-spoof checks, see reference/swe-envs.md §1.5):

* resolved iff every FAIL_TO_PASS and every PASS_TO_PASS test passed (PASSED or XFAIL); a test
  missing from the log counts as failed; a required test with a failing line anywhere in the
  test output counts as failed, whatever other lines say (a patch can print "PASSED" lines);
* only the text between this run's start and end markers is parsed (the markers carry a nonce
  the patch cannot know); the test command's exit code is read after the end marker;
* the log is not trusted (reward 0, `invalid_reason` says why) when: the exit code is non-zero
  but no test FAILED or ERRORed; there is no sign the suite started or finished; pytest's
  summary header appears twice; the tests were killed by the timeout; the patch did not apply;
* failures of the grading machinery itself are `InfraError`s, never a reward of 0: the rollout
  layer drops or retries those samples instead of training on them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from envs.swe.config import GradingConfig
from envs.swe.grading_log import FAILING_STATUSES, PASSING_STATUSES

__all__ = [
    "EpisodeTask",
    "GradableTask",
    "GradingInputs",
    "GradingReport",
    "InfraError",
    "LogMarkers",
    "LogParser",
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
class LogMarkers:
    """Lines around the test output, and the prefix of the exit-code line after the end."""

    start: str
    end: str
    exit_code: str

    @classmethod
    def with_nonce(cls, nonce: str) -> LogMarkers:
        return cls(
            start=f">>>>> Start Test Output {nonce}",
            end=f">>>>> End Test Output {nonce}",
            exit_code=f">>>>> Test Exit Code {nonce}:",
        )


@dataclass(frozen=True, slots=True)
class GradingInputs:
    """Everything the decision looks at. `patch_error` is why the patch was not tested."""

    instance_id: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    markers: LogMarkers
    log: str = ""
    patch_error: str | None = None
    apply_method: str = ""
    discarded_paths: tuple[str, ...] = ()
    infra_error: InfraError | None = None
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class GradingReport:
    """The outcome of grading one patch. `reward` is 1.0 only when `resolved`.

    `infra_error` set means the grade is void (drop the sample); `invalid_reason` set means the
    tests were not run or their log was not trusted, which is the patch's fault (reward 0).
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

    @property
    def reward(self) -> float:
        return 1.0 if self.resolved else 0.0

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
        }


def grade(inputs: GradingInputs, config: GradingConfig, parse_log: LogParser) -> GradingReport:
    """Decide whether the patch resolved the task (see the module docstring for the rules)."""
    common: dict[str, Any] = {
        "instance_id": inputs.instance_id,
        "apply_method": inputs.apply_method,
        "discarded_paths": inputs.discarded_paths,
        "duration_s": inputs.duration_s,
        "log_tail": inputs.log[-config.log_tail_chars :] if config.log_tail_chars else "",
    }
    unresolved = _all_failed(inputs)
    if inputs.infra_error is not None:
        return GradingReport(resolved=False, infra_error=inputs.infra_error, **unresolved, **common)
    if inputs.patch_error is not None:
        return GradingReport(
            resolved=False, invalid_reason=inputs.patch_error, **unresolved, **common
        )
    region = _test_region(inputs.log, inputs.markers)
    if isinstance(region, InfraError):
        return GradingReport(resolved=False, infra_error=region, **unresolved, **common)
    text, exit_code = region
    statuses = {test_id: str(status) for test_id, status in parse_log(text).items()}
    _apply_failing_lines(statuses, text, inputs.fail_to_pass + inputs.pass_to_pass, parse_log)
    outcome = _split_outcomes(inputs, statuses)
    timed_out = exit_code in config.timeout_exit_codes
    if timed_out and config.tests_timeout_is_infra_error:
        infra = InfraError("tests_timed_out", f"the test command was killed (exit {exit_code})")
        return GradingReport(
            resolved=False, statuses=statuses, infra_error=infra, test_exit_code=exit_code,
            **outcome, **common,
        )  # fmt: skip
    invalid = _invalid_reason(text, exit_code, statuses, config, timed_out=timed_out)
    resolved = invalid is None and not outcome["f2p_failed"] and not outcome["p2p_failed"]
    return GradingReport(
        resolved=resolved, statuses=statuses, invalid_reason=invalid, test_exit_code=exit_code,
        **outcome, **common,
    )  # fmt: skip


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


def _test_region(log: str, markers: LogMarkers) -> tuple[str, int] | InfraError:
    lines = log.splitlines()
    start = _index_of(lines, markers.start, 0)
    if start is None:
        return InfraError("no_test_output", "the test command did not start (no start marker)")
    end = _index_of(lines, markers.end, start + 1)
    if end is None:
        return InfraError("test_output_incomplete", "the test log has no end marker")
    for line in lines[end + 1 :]:
        if line.startswith(markers.exit_code):
            value = line[len(markers.exit_code) :].strip()
            if re.fullmatch(r"-?\d+", value):
                return "\n".join(lines[start + 1 : end]), int(value)
            break
    return InfraError("no_exit_code", "the test log has no exit code after the end marker")


def _index_of(lines: Sequence[str], marker: str, first: int) -> int | None:
    for index in range(first, len(lines)):
        if lines[index].rstrip() == marker:
            return index
    return None


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
    text: str, exit_code: int, statuses: Mapping[str, str], config: GradingConfig, *,
    timed_out: bool,
) -> str | None:  # fmt: skip
    if timed_out:
        return "tests_timed_out"
    if len(re.findall(config.summary_header_pattern, text, re.MULTILINE)) > 1:
        return "multiple_summaries"
    started = any(re.search(p, text, re.MULTILINE) for p in config.suite_started_patterns)
    finished = any(re.search(p, text, re.MULTILINE) for p in config.suite_summary_patterns)
    if not (started and finished):
        return "suite_not_run"
    any_failing = any(str(status) in _FAILING for status in statuses.values())
    if exit_code != 0 and not any_failing:
        return "exit_code_mismatch"
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
