"""The generator, materialization, verification and CLI on a tiny throwaway task set."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest
from typer.testing import CliRunner

from envs.swe.grading_log import TestStatus
from envs.swe.taskgen.cli import build_app
from envs.swe.taskgen.config import TaskGenConfig
from envs.swe.taskgen.generator import (
    TaskGenError,
    TaskOutcome,
    check_clean_run,
    derive_test_sets,
    generate_project,
)
from envs.swe.taskgen.project_files import write_snapshot
from envs.swe.taskgen.runner import SuiteRun
from envs.swe.taskgen.snapshot import SnapshotError, git, materialize_repo
from envs.swe.taskgen.specs import load_specs
from envs.swe.taskgen.verify import verify_task
from envs.swe.tasks import SWETask, dump_tasks_jsonl, load_tasks_strict

PROJECT = {
    "calc/__init__.py": "",
    "calc/ops.py": (
        "def add(a, b):\n"
        "    return a + b\n"
        "\n"
        "\n"
        "def clip(value, high=10):\n"
        "    if value > high:\n"
        "        return high\n"
        "    return value\n"
        "\n"
        "\n"
        "def unused(x):\n"
        "    return x * 2\n"
    ),
    "tests/__init__.py": "",
    "tests/test_ops.py": (
        "from calc.ops import add, clip\n"
        "\n"
        "\n"
        "def test_add():\n"
        "    assert add(2, 3) == 5\n"
        "\n"
        "\n"
        "def test_clip_high():\n"
        "    assert clip(12) == 10\n"
        "\n"
        "\n"
        "def test_clip_inside():\n"
        "    assert clip(3) == 3\n"
    ),
}

SPEC = """\
project: calc
repo: tiny/calc
version: "1.0"
created_at: "2026-11-30T00:00:00Z"
tasks:
  - id: add-subtracts
    mutation: {path: calc/ops.py, function: add, kind: arithmetic_operator}
    problem_statement: |
      add() subtracts. `calc.ops.add(2, 3)` returns -1 but it should return 5; the other
      functions of the module look fine.
  - id: untested
    mutation: {path: calc/ops.py, function: unused, kind: arithmetic_operator}
    problem_statement: |
      unused() is wrong, but no test covers it, so this spec must be rejected by the
      generator instead of becoming a task that nothing can grade.
"""

CONFIG = TaskGenConfig(workers=2, test_timeout_s=60)


@pytest.fixture(scope="module")
def taskset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("taskset")
    write_snapshot(PROJECT, root / "projects" / "calc")
    write_snapshot({"calc.yaml": SPEC}, root / "specs")
    return root


@pytest.fixture(scope="module")
def outcomes(taskset: Path) -> list[TaskOutcome]:
    (spec,) = load_specs(taskset / "specs")
    return generate_project(spec, taskset, CONFIG)


@pytest.fixture(scope="module")
def task(outcomes: list[TaskOutcome]) -> SWETask:
    assert outcomes[0].task is not None
    return outcomes[0].task


def run(statuses: dict[str, TestStatus], exit_code: int = 0) -> SuiteRun:
    return SuiteRun(statuses=MappingProxyType(statuses), exit_code=exit_code)


def test_fail_to_pass_passes_clean_and_fails_buggy() -> None:
    clean = run({"a": TestStatus.PASSED, "b": TestStatus.PASSED, "c": TestStatus.PASSED})
    buggy = run({"a": TestStatus.FAILED, "b": TestStatus.PASSED})  # c missing: counts as failed
    assert derive_test_sets(clean, buggy) == (("a", "c"), ("b",))


def test_tests_not_passing_clean_are_in_neither_set() -> None:
    clean = run({"a": TestStatus.SKIPPED, "b": TestStatus.XFAIL})
    buggy = run({"a": TestStatus.FAILED, "b": TestStatus.XFAIL})
    assert derive_test_sets(clean, buggy) == ((), ("b",))


def test_failing_clean_suite_stops_the_project() -> None:
    with pytest.raises(TaskGenError, match="must pass"):
        check_clean_run("calc", run({"a": TestStatus.FAILED}, exit_code=1))


def test_generated_task_records_the_tests_that_catch_the_bug(task: SWETask) -> None:
    assert task.instance_id == "tiny__calc-add-subtracts"
    assert task.FAIL_TO_PASS == ("tests/test_ops.py::test_add",)
    assert task.PASS_TO_PASS == (
        "tests/test_ops.py::test_clip_high",
        "tests/test_ops.py::test_clip_inside",
    )
    assert task.test_files == ("tests/test_ops.py",)


def test_gold_patch_reverts_the_mutation_and_test_patch_adds_the_hidden_test(task: SWETask) -> None:
    assert "-    return a - b\n+    return a + b\n" in task.patch
    assert "+def test_add():\n" in task.test_patch
    assert "tests/" not in task.patch


def test_spec_without_fail_to_pass_is_rejected(outcomes: list[TaskOutcome]) -> None:
    assert outcomes[1].task is None
    assert outcomes[1].rejection is not None
    assert "no test fails on the bug" in outcomes[1].rejection


def test_materialized_repo_is_at_base_commit_without_hidden_tests(
    task: SWETask, taskset: Path, tmp_path: Path
) -> None:
    head = materialize_repo(task, tmp_path / "repo", taskset_dir=taskset)
    assert head == task.base_commit
    assert git(tmp_path / "repo", "rev-list", "--all", "--count").strip() == "1"
    assert "test_add" not in (tmp_path / "repo" / "tests" / "test_ops.py").read_text()
    assert "return a - b" in (tmp_path / "repo" / "calc" / "ops.py").read_text()


def test_materialize_refuses_a_project_that_changed(task: SWETask, tmp_path: Path) -> None:
    changed = tmp_path / "taskset"
    write_snapshot(
        {**PROJECT, "calc/ops.py": PROJECT["calc/ops.py"] + "# edited\n"},
        changed / "projects" / "calc",
    )
    with pytest.raises(SnapshotError, match="regenerate"):
        materialize_repo(task, tmp_path / "repo", taskset_dir=changed)


def test_materialize_needs_a_project(task: SWETask, tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="names no project"):
        materialize_repo(task.model_copy(update={"project": None}), tmp_path / "repo")


def test_materialize_needs_an_empty_directory(task: SWETask, taskset: Path, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "stray.txt").write_text("x")
    with pytest.raises(SnapshotError, match="not empty"):
        materialize_repo(task, tmp_path / "repo", taskset_dir=taskset)


def test_verify_accepts_a_generated_task(task: SWETask, taskset: Path) -> None:
    verdict = verify_task(task, CONFIG, taskset)
    assert verdict.problems == ()
    assert (verdict.f2p_failing_without_fix, verdict.p2p_passing_with_fix) == (1, 2)


def test_verify_rejects_a_task_that_an_empty_patch_would_solve(
    task: SWETask, taskset: Path
) -> None:
    claims = task.model_copy(update={"FAIL_TO_PASS": ("tests/test_ops.py::test_clip_high",)})
    verdict = verify_task(claims, CONFIG, taskset)
    assert any("empty patch would win" in problem for problem in verdict.problems)


def test_verify_reports_a_gold_patch_that_does_not_match_the_project(
    task: SWETask, taskset: Path
) -> None:
    broken = task.patch.replace("+    return a + b", "+    return a + b  # edited")
    verdict = verify_task(task.model_copy(update={"patch": broken}), CONFIG, taskset)
    assert any("does not reverse-apply" in problem for problem in verdict.problems)


def test_cli_generate_writes_accepted_tasks_and_fails_on_rejected_specs(
    taskset: Path, task: SWETask, tmp_path: Path
) -> None:
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(
        build_app(), ["generate", "--taskset", str(taskset), "--out", str(out)]
    )
    assert result.exit_code == 1, result.output
    assert out.read_text(encoding="utf-8") == dump_tasks_jsonl([task])
    assert load_tasks_strict(out)[0].base_commit == task.base_commit


def test_cli_sites_lists_occurrences(taskset: Path) -> None:
    result = CliRunner().invoke(
        build_app(),
        [
            "sites",
            "calc",
            "calc/ops.py",
            "--function",
            "clip",
            "--kind",
            "boundary_shift",
            "--taskset",
            str(taskset),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "#0 line 6" in result.output
