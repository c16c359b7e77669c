"""Check that every task grades as intended: the gold patch passes, an empty patch fails.

For each task, on the host: build the repository at `base_commit` with `materialize_repo`
(which checks the commit id), apply `test_patch` and run the suite (at least one F2P test must
fail, every P2P test must pass), then apply the gold `patch` and run again (every F2P and P2P
test must pass). Diffs must also stay on their side: `patch` touches no test file and
`test_patch` only test files.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from envs.swe.taskgen.config import TaskGenConfig
from envs.swe.taskgen.diffs import diff_paths
from envs.swe.taskgen.project_files import is_test_file
from envs.swe.taskgen.runner import SuiteRun, run_suite_in
from envs.swe.taskgen.snapshot import SnapshotError, git, materialize_repo
from envs.swe.tasks import SHIPPED_TASKSET_DIR, SWETask

__all__ = ["TaskVerdict", "verify_task"]


@dataclass(frozen=True, slots=True)
class TaskVerdict:
    """The result of verifying one task; `problems` is empty when it is sound."""

    instance_id: str
    problems: tuple[str, ...]
    f2p_failing_without_fix: int = 0
    f2p_passing_with_fix: int = 0
    p2p_passing_with_fix: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_task(
    task: SWETask, config: TaskGenConfig, taskset_dir: str | Path = SHIPPED_TASKSET_DIR
) -> TaskVerdict:
    """Verify one task in a temporary directory (see the module docstring)."""
    problems = _diff_side_problems(task)
    with tempfile.TemporaryDirectory(prefix="swe-verify-") as scratch:
        repo = Path(scratch) / "repo"
        try:
            materialize_repo(task, repo, taskset_dir=taskset_dir)
            git(repo, "apply", "-", stdin=task.test_patch)
        except SnapshotError as exc:
            return TaskVerdict(task.instance_id, (*problems, str(exc)))
        without_fix = run_suite_in(repo, task.test_files, config)
        try:
            git(repo, "apply", "-", stdin=task.patch)
        except SnapshotError as exc:
            return TaskVerdict(task.instance_id, (*problems, f"gold patch does not apply: {exc}"))
        with_fix = run_suite_in(repo, task.test_files, config)
    problems += _grading_problems(task, without_fix, with_fix)
    return TaskVerdict(
        task.instance_id,
        tuple(problems),
        f2p_failing_without_fix=sum(not without_fix.passed(t) for t in task.FAIL_TO_PASS),
        f2p_passing_with_fix=sum(with_fix.passed(t) for t in task.FAIL_TO_PASS),
        p2p_passing_with_fix=sum(with_fix.passed(t) for t in task.PASS_TO_PASS),
    )


def _diff_side_problems(task: SWETask) -> list[str]:
    problems = []
    test_paths_in_patch = [path for path in diff_paths(task.patch) if is_test_file(path)]
    if test_paths_in_patch:
        problems.append(f"gold patch touches test files: {', '.join(test_paths_in_patch)}")
    source_paths_in_tests = [path for path in diff_paths(task.test_patch) if not is_test_file(path)]
    if source_paths_in_tests:
        problems.append(f"test_patch touches non-test files: {', '.join(source_paths_in_tests)}")
    return problems


def _grading_problems(task: SWETask, without_fix: SuiteRun, with_fix: SuiteRun) -> list[str]:
    problems = []
    if without_fix.timed_out or with_fix.timed_out:
        problems.append("a test run timed out")
    if all(without_fix.passed(test_id) for test_id in task.FAIL_TO_PASS):
        problems.append("every FAIL_TO_PASS test passes without the fix (empty patch would win)")
    broken_before = [t for t in task.PASS_TO_PASS if not without_fix.passed(t)]
    if broken_before:
        problems.append(f"PASS_TO_PASS tests fail without the fix: {', '.join(broken_before[:3])}")
    failing_after = [t for t in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS) if not with_fix.passed(t)]
    if failing_after:
        problems.append(f"tests fail with the gold patch: {', '.join(failing_after[:3])}")
    if with_fix.exit_code != 0:
        problems.append(f"the suite exits with {with_fix.exit_code} under the gold patch")
    return problems
