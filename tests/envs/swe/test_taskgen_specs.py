"""Task spec files and the generator config are validated with field-named errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.swe.taskgen.config import DEFAULT_CONFIG_PATH, TaskGenConfig
from envs.swe.taskgen.mutations import MutationKind
from envs.swe.taskgen.specs import load_project_spec, load_specs
from foundation.config import load_config
from foundation.errors import ConfigError

TASK = """\
  - id: {task_id}
    mutation: {{path: calc/ops.py, function: add, kind: {kind}}}
    problem_statement: |
      add() subtracts: `add(2, 3)` returns -1 instead of 5, which breaks every total we
      compute with it.
"""


def spec_text(*tasks: str) -> str:
    header = 'project: calc\nrepo: tiny/calc\nversion: "1.0"\ncreated_at: "2026-11-30T00:00:00Z"\n'
    return header + "tasks:\n" + "".join(tasks)


def write(tmp_path: Path, text: str, name: str = "calc.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_spec_loads_with_a_mutation_target(tmp_path: Path) -> None:
    spec = load_project_spec(write(tmp_path, spec_text(TASK.format(task_id="a", kind="remove_if"))))
    target = spec.tasks[0].mutation.target()
    assert (target.path, target.function, target.kind, target.occurrence) == (
        "calc/ops.py",
        "add",
        MutationKind.REMOVE_IF,
        0,
    )
    assert spec.instance_id(spec.tasks[0]) == "tiny__calc-a"


def test_unknown_mutation_kind_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, spec_text(TASK.format(task_id="a", kind="explode")))
    with pytest.raises(ConfigError, match=r"tasks\.0\.mutation\.kind"):
        load_project_spec(path)


def test_duplicate_task_ids_are_rejected(tmp_path: Path) -> None:
    task = TASK.format(task_id="a", kind="remove_if")
    with pytest.raises(ConfigError, match="appears twice"):
        load_project_spec(write(tmp_path, spec_text(task, task)))


def test_misspelt_key_is_rejected(tmp_path: Path) -> None:
    text = spec_text(TASK.format(task_id="a", kind="remove_if")).replace("function:", "fucntion:")
    with pytest.raises(ConfigError, match="fucntion"):
        load_project_spec(write(tmp_path, text))


def test_requested_project_without_spec_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, spec_text(TASK.format(task_id="a", kind="remove_if")))
    with pytest.raises(FileNotFoundError, match="known: calc"):
        load_specs(tmp_path, ("money",))


def test_shipped_generator_config_is_valid() -> None:
    config = load_config(TaskGenConfig, DEFAULT_CONFIG_PATH)
    assert config.test_cmd.startswith("python3 -m pytest")
