"""Turn curated specs into SWE tasks.

For each spec: inject the bug into a copy of the project, run the test suite on the clean and
the buggy code, take FAIL_TO_PASS (pass clean, fail buggy) and PASS_TO_PASS (pass on both),
remove the F2P tests from the repository the agent sees, and write the gold `patch` and the
`test_patch` as git-style diffs. A spec whose bug no test catches is rejected, not shipped.
Everything is derived from the specs and the project files, so regeneration is byte-identical.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from envs.swe.taskgen.config import TaskGenConfig
from envs.swe.taskgen.diffs import unified_diff
from envs.swe.taskgen.hidden_tests import hide_tests
from envs.swe.taskgen.mutations import Mutation, MutationError, MutationKind, apply_mutation
from envs.swe.taskgen.project_files import is_test_file, read_project, split_tests
from envs.swe.taskgen.runner import SuiteRun, run_suite
from envs.swe.taskgen.snapshot import snapshot_commit, snapshot_tree
from envs.swe.taskgen.specs import ProjectSpec, TaskSpec
from envs.swe.tasks import SWETask

# CPython 3.11 (gh-106905): `ast.parse` running on several threads at once can raise
# "SystemError: AST constructor recursion depth mismatch". Suites run on worker threads, so
# the AST work of a task (mutating the source, hiding tests) holds this lock; it is cheap
# next to the suite runs it would otherwise overlap with.
_AST_LOCK = threading.Lock()

__all__ = [
    "TaskGenError",
    "TaskOutcome",
    "assemble_task",
    "check_clean_run",
    "derive_test_sets",
    "generate_project",
    "generate_task",
]


class TaskGenError(RuntimeError):
    """A whole project cannot produce tasks (its clean suite does not pass)."""


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """What became of one spec: a task, or why it was rejected."""

    project: str
    spec_id: str
    instance_id: str
    kind: MutationKind
    task: SWETask | None
    rejection: str | None = None
    location: str = ""


def derive_test_sets(clean: SuiteRun, buggy: SuiteRun) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(FAIL_TO_PASS, PASS_TO_PASS), each sorted: tests that pass clean and fail / pass buggy.

    A test missing from the buggy log (e.g. its module no longer imports) counts as failing.
    """
    passing_clean = sorted(test_id for test_id in clean.statuses if clean.passed(test_id))
    fail_to_pass = tuple(test_id for test_id in passing_clean if not buggy.passed(test_id))
    pass_to_pass = tuple(test_id for test_id in passing_clean if buggy.passed(test_id))
    return fail_to_pass, pass_to_pass


def check_clean_run(project: str, run: SuiteRun) -> None:
    """Raise unless the clean suite ran and every test passed."""
    if run.timed_out:
        raise TaskGenError(f"project {project}: the clean test suite timed out; speed it up")
    if not run.statuses or run.failing() or run.exit_code != 0:
        failing = ", ".join(run.failing()[:5]) or "no test results"
        raise TaskGenError(
            f"project {project}: the clean test suite must pass (exit code {run.exit_code}; "
            f"{failing}); fix the project before generating tasks\n{run.log[-2000:]}"
        )


def assemble_task(
    spec: ProjectSpec,
    task_spec: TaskSpec,
    clean_files: Mapping[str, str],
    mutation: Mutation,
    fail_to_pass: tuple[str, ...],
    pass_to_pass: tuple[str, ...],
    config: TaskGenConfig,
) -> SWETask:
    """Build the task record (pure: no I/O)."""
    buggy_files = {**clean_files, mutation.target.path: mutation.mutated_source}
    base_files = hide_tests(buggy_files, fail_to_pass)
    base_sources, base_tests = split_tests(base_files)
    clean_sources, clean_tests = split_tests(clean_files)
    return SWETask(
        instance_id=spec.instance_id(task_spec),
        repo=spec.repo,
        base_commit=snapshot_commit(base_files),
        problem_statement=task_spec.problem_statement,
        patch=unified_diff(base_sources, clean_sources),
        test_patch=unified_diff(base_tests, clean_tests),
        FAIL_TO_PASS=fail_to_pass,
        PASS_TO_PASS=pass_to_pass,
        version=spec.version,
        environment_setup_commit=snapshot_commit(clean_files),
        hints_text=task_spec.hints_text,
        created_at=spec.created_at,
        project=spec.project,
        project_tree=snapshot_tree(clean_files),
        test_cmd=config.test_cmd,
        test_files=tuple(sorted(clean_tests)),
        install_cmd=config.install_cmd,
    )


def generate_task(
    spec: ProjectSpec,
    task_spec: TaskSpec,
    clean_files: Mapping[str, str],
    clean_run: SuiteRun,
    config: TaskGenConfig,
) -> TaskOutcome:
    """Inject one spec's bug, run the suite on it and assemble the task (or reject the spec)."""
    target = task_spec.mutation.target()

    def rejected(reason: str, location: str = "") -> TaskOutcome:
        return TaskOutcome(
            spec.project,
            task_spec.id,
            spec.instance_id(task_spec),
            target.kind,
            None,
            reason,
            location,
        )

    if is_test_file(target.path):
        return rejected(f"the mutation targets the test file {target.path}; target source code")
    try:
        with _AST_LOCK:
            mutation = apply_mutation(clean_files, target)
    except MutationError as exc:
        return rejected(f"mutation does not apply: {exc}")
    location = mutation.describe()
    test_files = sorted(path for path in clean_files if is_test_file(path))
    buggy_run = run_suite({**clean_files, target.path: mutation.mutated_source}, test_files, config)
    if buggy_run.timed_out:
        return rejected(f"the suite timed out on the bug ({config.test_timeout_s} s)", location)
    fail_to_pass, pass_to_pass = derive_test_sets(clean_run, buggy_run)
    if not fail_to_pass:
        return rejected(
            "no test fails on the bug (no FAIL_TO_PASS); pick another site or add a test",
            location,
        )
    with _AST_LOCK:
        task = assemble_task(
            spec, task_spec, clean_files, mutation, fail_to_pass, pass_to_pass, config
        )
    return TaskOutcome(
        spec.project, task_spec.id, task.instance_id, target.kind, task, None, location
    )


def generate_project(
    spec: ProjectSpec,
    taskset_dir: str | Path,
    config: TaskGenConfig,
    on_outcome: Callable[[TaskOutcome], None] | None = None,
) -> list[TaskOutcome]:
    """Generate every task of one project, in spec order (suites run `config.workers` at once).

    Raises:
        TaskGenError: the project's clean suite does not pass.
    """
    clean_files = read_project(Path(taskset_dir) / "projects" / spec.project)
    test_files = sorted(path for path in clean_files if is_test_file(path))
    clean_run = run_suite(clean_files, test_files, config)
    check_clean_run(spec.project, clean_run)

    def one(task_spec: TaskSpec) -> TaskOutcome:
        outcome = generate_task(spec, task_spec, clean_files, clean_run, config)
        if on_outcome is not None:
            on_outcome(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=config.workers) as pool:
        return list(pool.map(one, spec.tasks))
