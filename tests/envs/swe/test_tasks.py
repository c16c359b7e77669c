"""SWETask records and the JSONL / JSON / Parquet loaders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envs.swe.tasks import (
    DEFAULT_TEST_CMD,
    SWETask,
    TaskSetError,
    dump_tasks_jsonl,
    load_tasks,
    load_tasks_strict,
    parse_task_records,
)


def record(instance_id: str = "owner__repo-1", **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "instance_id": instance_id,
        "repo": "owner/repo",
        "base_commit": "a" * 40,
        "problem_statement": "Something is broken.",
        "patch": "diff --git a/x.py b/x.py\n",
        "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n",
        "FAIL_TO_PASS": ["tests/test_x.py::test_a"],
        "PASS_TO_PASS": ["tests/test_x.py::test_b"],
        "version": "1.0",
        "environment_setup_commit": "b" * 40,
    }
    base.update(changes)
    return base


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_jsonl_loads_every_valid_record(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [record("o__r-1"), record("o__r-2")])
    result = load_tasks(path)
    assert result.ok
    assert [task.instance_id for task in result.tasks] == ["o__r-1", "o__r-2"]


def test_json_encoded_test_lists_are_decoded(tmp_path: Path) -> None:
    encoded = record(FAIL_TO_PASS='["t.py::test_a", "t.py::test_b[x y]"]', PASS_TO_PASS="[]")
    task = load_tasks_strict(write_jsonl(tmp_path / "t.jsonl", [encoded]))[0]
    assert task.FAIL_TO_PASS == ("t.py::test_a", "t.py::test_b[x y]")
    assert task.PASS_TO_PASS == ()


def test_json_file_holding_a_list_loads(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps([record()]), encoding="utf-8")
    assert load_tasks_strict(path)[0].instance_id == "owner__repo-1"


def test_json_file_not_holding_a_list_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(record()), encoding="utf-8")
    with pytest.raises(TaskSetError, match="JSON list"):
        load_tasks(path)


def test_parquet_file_with_string_encoded_lists_loads(tmp_path: Path) -> None:
    rows = [
        record("o__r-1", FAIL_TO_PASS='["t.py::test_a"]', hints_text=None),
        record("o__r-2", difficulty="easy"),
    ]
    rows[1]["FAIL_TO_PASS"] = json.dumps(rows[1]["FAIL_TO_PASS"])
    rows[0]["PASS_TO_PASS"] = json.dumps(rows[0]["PASS_TO_PASS"])
    rows[1]["PASS_TO_PASS"] = json.dumps(rows[1]["PASS_TO_PASS"])
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    tasks = load_tasks_strict(path)
    assert [task.FAIL_TO_PASS for task in tasks] == [
        ("t.py::test_a",),
        ("tests/test_x.py::test_a",),
    ]
    assert tasks[0].hints_text == ""


def test_bad_record_is_named_by_index_id_and_field_and_the_rest_load(tmp_path: Path) -> None:
    rows = [record("o__r-1"), record("o__r-2", base_commit="not-a-sha"), record("o__r-3")]
    result = load_tasks(write_jsonl(tmp_path / "t.jsonl", rows))
    assert [task.instance_id for task in result.tasks] == ["o__r-1", "o__r-3"]
    (error,) = result.errors
    assert (error.index, error.instance_id, error.field, error.line) == (
        1,
        "o__r-2",
        "base_commit",
        2,
    )
    assert "record 1 (line 2) [o__r-2]: field 'base_commit'" in str(error)


def test_missing_field_is_reported_by_name() -> None:
    incomplete = record()
    del incomplete["problem_statement"]
    (error,) = parse_task_records([incomplete]).errors
    assert error.field == "problem_statement"


def test_string_that_is_not_a_json_list_is_reported() -> None:
    (error,) = parse_task_records([record(FAIL_TO_PASS="tests/test_x.py::test_a")]).errors
    assert error.field == "FAIL_TO_PASS"
    assert "JSON" in error.message


def test_empty_fail_to_pass_is_rejected() -> None:
    (error,) = parse_task_records([record(FAIL_TO_PASS=[])]).errors
    assert error.field == "FAIL_TO_PASS"


def test_invalid_json_line_is_an_error_of_that_record_only(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps(record("o__r-1")) + "\n\n{oops\n" + json.dumps(record("o__r-3")) + "\n"
    )
    result = load_tasks(path)
    assert [task.instance_id for task in result.tasks] == ["o__r-1", "o__r-3"]
    (error,) = result.errors
    assert (error.index, error.line, error.field) == (1, 3, None)


def test_record_that_is_not_an_object_is_an_error() -> None:
    (error,) = parse_task_records([["a", "list"]]).errors
    assert "not an object" in error.message


def test_duplicate_instance_id_is_an_error_of_the_later_record() -> None:
    result = parse_task_records([record("o__r-1"), record("o__r-1")])
    assert len(result.tasks) == 1
    assert (result.errors[0].index, result.errors[0].field) == (1, "instance_id")


def test_strict_loading_lists_every_error(tmp_path: Path) -> None:
    rows = [record("o__r-1", repo=""), record("o__r-2", version=None)]
    with pytest.raises(TaskSetError) as raised:
        load_tasks_strict(write_jsonl(tmp_path / "t.jsonl", rows))
    assert "2 problem(s)" in str(raised.value)
    assert "[o__r-1]: field 'repo'" in str(raised.value)
    assert "[o__r-2]: field 'version'" in str(raised.value)


@pytest.mark.parametrize("name", ["t.csv", "missing.jsonl"])
def test_unreadable_task_file_raises(tmp_path: Path, name: str) -> None:
    if name.endswith(".csv"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    with pytest.raises(TaskSetError):
        load_tasks(tmp_path / name)


def test_numeric_version_and_unknown_columns_are_accepted() -> None:
    task = SWETask.model_validate(record(version=3.0, difficulty="hard"))
    assert task.version == "3.0"


def test_local_fields_have_swebench_defaults() -> None:
    task = SWETask.model_validate(record())
    assert (task.test_cmd, task.test_files, task.install_cmd, task.project) == (
        DEFAULT_TEST_CMD,
        (),
        "",
        None,
    )


def test_test_command_appends_the_test_files() -> None:
    task = SWETask.model_validate(record(test_files=["tests/a.py", "tests/b.py"]))
    assert task.test_command == f"{DEFAULT_TEST_CMD} tests/a.py tests/b.py"


def test_tasks_are_immutable() -> None:
    task = SWETask.model_validate(record())
    with pytest.raises(ValueError):
        task.repo = "other/repo"  # type: ignore[misc]


def test_dumped_jsonl_loads_back_to_equal_tasks(tmp_path: Path) -> None:
    tasks = parse_task_records([record("o__r-1"), record("o__r-2", hints_text="ü")]).tasks
    path = tmp_path / "t.jsonl"
    path.write_text(dump_tasks_jsonl(tasks), encoding="utf-8")
    assert load_tasks_strict(path) == tasks
