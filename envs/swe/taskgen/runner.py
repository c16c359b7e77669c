"""Run a project's pytest suite on the host in a subprocess and read per-test outcomes.

Used by the generator (clean vs buggy runs) and by `verify`. The command is the task's own
`test_cmd` with its leading `python3` replaced by the configured interpreter, so the host run
and the in-image run differ only in the interpreter.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from envs.swe.grading_log import PASSING_STATUSES, TestStatus, parse_pytest_log
from envs.swe.taskgen.config import TaskGenConfig
from envs.swe.taskgen.project_files import write_snapshot

__all__ = ["SuiteRun", "host_test_argv", "run_suite", "run_suite_in"]

_TIMEOUT_EXIT_CODE = 124  # what coreutils `timeout` returns, so logs read the same


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """The outcome of one test-suite run: per-test statuses, exit code and the raw log."""

    statuses: Mapping[str, TestStatus] = field(default_factory=lambda: MappingProxyType({}))
    exit_code: int = 0
    timed_out: bool = False
    duration_s: float = 0.0
    log: str = ""

    def passed(self, test_id: str) -> bool:
        """True if the test passed (PASSED or XFAIL); a test missing from the log did not."""
        return self.statuses.get(test_id) in PASSING_STATUSES

    def failing(self) -> list[str]:
        """Ids of tests that did not pass, sorted."""
        return sorted(test_id for test_id in self.statuses if not self.passed(test_id))


def host_test_argv(config: TaskGenConfig, test_files: Sequence[str]) -> list[str]:
    """The task's test command for this host: `test_cmd` + test files, interpreter swapped."""
    argv = shlex.split(config.test_cmd)
    if argv and argv[0] == "python3":
        argv[0] = config.python or sys.executable
    return [*argv, *test_files]


def run_suite_in(
    repo_dir: str | Path, test_files: Sequence[str], config: TaskGenConfig
) -> SuiteRun:
    """Run the suite at `repo_dir` (the repository root) and parse its `-rA` summary."""
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
    if config.isolate_plugins:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    started = time.monotonic()
    try:
        completed = subprocess.run(
            host_test_argv(config, test_files),
            cwd=repo_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=config.test_timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        log = _text(exc.stdout) + _text(exc.stderr)
        return SuiteRun(
            statuses=MappingProxyType(parse_pytest_log(log)),
            exit_code=_TIMEOUT_EXIT_CODE,
            timed_out=True,
            duration_s=time.monotonic() - started,
            log=log,
        )
    log = completed.stdout + completed.stderr
    return SuiteRun(
        statuses=MappingProxyType(parse_pytest_log(completed.stdout)),
        exit_code=completed.returncode,
        duration_s=time.monotonic() - started,
        log=log,
    )


def run_suite(
    files: Mapping[str, str], test_files: Sequence[str], config: TaskGenConfig
) -> SuiteRun:
    """Write the snapshot `files` to a fresh temporary directory and run the suite there."""
    with tempfile.TemporaryDirectory(prefix="swe-taskgen-") as scratch:
        write_snapshot(files, scratch)
        return run_suite_in(scratch, test_files, config)


def _text(output: bytes | str | None) -> str:
    if output is None:
        return ""
    return output.decode("utf-8", "replace") if isinstance(output, bytes) else output
