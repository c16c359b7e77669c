"""The shipped offline task set matches its specs and projects, and grades as intended."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from envs.swe.taskgen.config import DEFAULT_CONFIG_PATH, TaskGenConfig
from envs.swe.taskgen.diffs import unified_diff
from envs.swe.taskgen.generator import generate_project
from envs.swe.taskgen.mutations import apply_mutation
from envs.swe.taskgen.project_files import read_project
from envs.swe.taskgen.snapshot import materialize_repo, snapshot_tree
from envs.swe.taskgen.specs import ProjectSpec, load_specs
from envs.swe.taskgen.verify import verify_task
from envs.swe.tasks import SHIPPED_TASKSET_DIR, SWETask, dump_tasks_jsonl, load_shipped_tasks
from foundation.config import load_config

TASKS_FILE = SHIPPED_TASKSET_DIR / "tasks.jsonl"
# The project whose regeneration runs in the fast suite (the others only in the slow one).
FAST_PROJECT = "textkit"


@pytest.fixture(scope="module")
def tasks() -> tuple[SWETask, ...]:
    return load_shipped_tasks()


@pytest.fixture(scope="module")
def specs() -> list[ProjectSpec]:
    return load_specs(SHIPPED_TASKSET_DIR / "specs")


@pytest.fixture(scope="module")
def config() -> TaskGenConfig:
    return load_config(TaskGenConfig, DEFAULT_CONFIG_PATH)


def test_shipped_set_has_at_least_24_tasks_over_at_least_4_projects(
    tasks: tuple[SWETask, ...],
) -> None:
    per_project = Counter(task.project for task in tasks)
    assert len(tasks) >= 24
    assert len(per_project) >= 4
    assert min(per_project.values()) >= 6


def test_every_task_has_a_fail_to_pass_test(tasks: tuple[SWETask, ...]) -> None:
    assert all(task.FAIL_TO_PASS for task in tasks)


def test_tasks_are_the_specs_in_order(tasks: tuple[SWETask, ...], specs: list[ProjectSpec]) -> None:
    expected = [spec.instance_id(task) for spec in specs for task in spec.tasks]
    assert [task.instance_id for task in tasks] == expected


def test_problem_statements_are_the_spec_texts(
    tasks: tuple[SWETask, ...], specs: list[ProjectSpec]
) -> None:
    statements = {
        spec.instance_id(task): task.problem_statement for spec in specs for task in spec.tasks
    }
    assert all(task.problem_statement == statements[task.instance_id] for task in tasks)


def test_projects_have_not_changed_since_generation(tasks: tuple[SWETask, ...]) -> None:
    trees = {
        project: snapshot_tree(read_project(SHIPPED_TASKSET_DIR / "projects" / project))
        for project in {task.project for task in tasks if task.project}
    }
    stale = [task.instance_id for task in tasks if task.project_tree != trees[task.project or ""]]
    assert stale == [], "projects changed: run `python -m envs.swe.taskgen generate`"


def test_gold_patches_are_the_reverse_of_the_spec_mutations(
    tasks: tuple[SWETask, ...], specs: list[ProjectSpec]
) -> None:
    by_id = {task.instance_id: task for task in tasks}
    for spec in specs:
        clean = read_project(SHIPPED_TASKSET_DIR / "projects" / spec.project)
        for task_spec in spec.tasks:
            mutation = apply_mutation(clean, task_spec.mutation.target())
            path = mutation.target.path
            expected = unified_diff({path: mutation.mutated_source}, {path: clean[path]})
            assert by_id[spec.instance_id(task_spec)].patch == expected


def test_problem_statements_do_not_quote_the_fix(tasks: tuple[SWETask, ...]) -> None:
    for task in tasks:
        changed = [
            line[1:].strip()
            for line in task.patch.splitlines()
            if line[:1] in "+-" and line[:3] not in {"+++", "---"}
        ]
        leaked = [line for line in changed if len(line) > 12 and line in task.problem_statement]
        assert leaked == [], task.instance_id


def test_shipped_task_materializes_at_its_base_commit_without_its_tests(
    tasks: tuple[SWETask, ...], tmp_path: Path
) -> None:
    task = tasks[0]
    assert materialize_repo(task, tmp_path / "repo") == task.base_commit
    hidden_name = task.FAIL_TO_PASS[0].split("::")[1].split("[")[0]
    hidden_file = tmp_path / "repo" / task.FAIL_TO_PASS[0].split("::")[0]
    assert not hidden_file.exists() or f"def {hidden_name}(" not in hidden_file.read_text()


def test_regenerating_one_project_is_byte_identical(
    specs: list[ProjectSpec], config: TaskGenConfig
) -> None:
    (spec,) = [spec for spec in specs if spec.project == FAST_PROJECT]
    shipped = [
        line + "\n"
        for line in TASKS_FILE.read_text(encoding="utf-8").splitlines()
        if f'"project":"{FAST_PROJECT}"' in line
    ]
    outcomes = generate_project(spec, SHIPPED_TASKSET_DIR, config)
    regenerated = dump_tasks_jsonl([outcome.task for outcome in outcomes if outcome.task])
    assert regenerated == "".join(shipped)


@pytest.mark.slow
def test_regenerating_every_project_is_byte_identical(
    specs: list[ProjectSpec], config: TaskGenConfig
) -> None:
    outcomes = [
        outcome for spec in specs for outcome in generate_project(spec, SHIPPED_TASKSET_DIR, config)
    ]
    assert [outcome.rejection for outcome in outcomes if outcome.rejection] == []
    regenerated = dump_tasks_jsonl([outcome.task for outcome in outcomes if outcome.task])
    assert regenerated == TASKS_FILE.read_text(encoding="utf-8")


@pytest.mark.slow
def test_every_shipped_task_passes_with_gold_and_fails_without(
    tasks: tuple[SWETask, ...], config: TaskGenConfig
) -> None:
    failures = {
        task.instance_id: verdict.problems
        for task in tasks
        if not (verdict := verify_task(task, config)).ok
    }
    assert failures == {}
