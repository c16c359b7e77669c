"""Dataset rows (SWE-bench, SWE-Gym, SWE-rebench, R2E-Gym column layouts) -> tasks (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from envs.swe.datasets import DatasetConfig, RepoSettings, dataset_row, load_dataset_tasks
from envs.swe.tasks import SWETask

BASE = "a" * 40
TEST_PATCH = (
    "diff --git a/tests/test_x.py b/tests/test_x.py\n--- a/tests/test_x.py\n+++ b/tests/test_x.py\n"
    "@@ -1 +1,2 @@\n x\n+y\n"
    "diff --git a/tests/data.txt b/tests/data.txt\n--- a/tests/data.txt\n+++ b/tests/data.txt\n"
    "@@ -1 +1,2 @@\n x\n+y\n"
)
SWE_BENCH_ROW = {
    "repo": "astropy/astropy",
    "instance_id": "astropy__astropy-12907",
    "base_commit": BASE,
    "patch": "diff --git a/x.py b/x.py\n",
    "test_patch": TEST_PATCH,
    "problem_statement": "separability is wrong for nested models",
    "hints_text": "",
    "created_at": "2022-03-03T15:14:54Z",
    "version": "4.3",
    "FAIL_TO_PASS": json.dumps(["tests/test_x.py::test_nested"]),
    "PASS_TO_PASS": json.dumps(["tests/test_x.py::test_flat"]),
    "environment_setup_commit": "b" * 40,
    "difficulty": "15 min - 1 hour",
}


def task_of(row: dict, **config: object) -> SWETask:
    return SWETask.model_validate(dataset_row(row, DatasetConfig(**config)))  # type: ignore[arg-type]


def test_a_swe_bench_row_runs_in_its_published_image_with_conda_activated() -> None:
    task = task_of(SWE_BENCH_ROW, format="swe-bench")
    assert task.image == "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"
    assert task.test_env_setup == "source /opt/miniconda3/bin/activate && conda activate testbed"
    assert task.test_command == "pytest -rA tests/test_x.py"  # Python test files only
    assert task.FAIL_TO_PASS == ("tests/test_x.py::test_nested",)
    assert task.environment_setup_commit == "b" * 40


def test_a_swe_gym_row_has_no_environment_commit_and_its_own_image_names() -> None:
    row: dict[str, object] = {
        k: v for k, v in SWE_BENCH_ROW.items() if k != "environment_setup_commit"
    }
    row.update(FAIL_TO_PASS=["tests/test_x.py::test_nested"], instance_id="getmoto__moto-1")
    task = task_of(row, format="swe-gym")
    assert task.image == "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-1:latest"
    assert task.environment_setup_commit == BASE


def test_a_swe_rebench_row_takes_its_test_command_and_image_from_the_row() -> None:
    row = {
        **SWE_BENCH_ROW,
        "install_config": {"test_cmd": ["pip install -e .", "pytest -rA -p no:cacheprovider"]},
        "image_name": "swerebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest",
    }
    task = task_of(row, format="swe-rebench")
    assert task.test_cmd == "pytest -rA -p no:cacheprovider"
    assert task.image == row["image_name"]


def test_an_r2e_gym_row_derives_its_fail_and_pass_lists_from_the_recorded_runs() -> None:
    old_log = (
        "===== short test summary info =====\n"
        "PASSED r2e_tests/test_1.py::test_kept\nFAILED r2e_tests/test_1.py::test_fixed - x\n"
    )
    row = {
        "repo_name": "pandas",
        "docker_image": "namanjain12/pandas_final:0123456789abcdef",
        "commit_hash": "0123456789abcdef0123",
        "parsed_commit_content": json.dumps({"old_commit_hash": BASE, "new_commit_hash": "c"}),
        "execution_result_content": json.dumps({"old_commit_res_stdout": old_log}),
        "expected_output_json": json.dumps(
            {
                "r2e_tests/test_1.py::test_kept": "PASSED",
                "r2e_tests/test_1.py::test_fixed": "PASSED",
            }
        ),
        "problem_statement": "to_csv drops the index name",
    }
    task = task_of(row, format="r2e-gym")
    assert task.FAIL_TO_PASS == ("r2e_tests/test_1.py::test_fixed",)
    assert task.PASS_TO_PASS == ("r2e_tests/test_1.py::test_kept",)
    assert task.base_commit == BASE and task.image == row["docker_image"]
    assert task.instance_id == "pandas__0123456789ab"


def test_per_repository_settings_override_the_dataset_defaults() -> None:
    settings = RepoSettings(test_cmd="python -m pytest -rA -n0", test_env_setup="")
    task = task_of(SWE_BENCH_ROW, format="swe-bench", repos={"astropy/astropy": settings})
    assert task.test_cmd == "python -m pytest -rA -n0" and task.test_env_setup == ""


def test_without_images_a_row_is_built_from_a_local_checkout() -> None:
    task = task_of(
        SWE_BENCH_ROW, format="swe-bench", use_images=False, repo_path_template="repos/{name}"
    )
    assert task.image is None and task.repo_path == "repos/astropy" and task.test_env_setup == ""


def test_a_downloaded_parquet_file_loads_with_per_row_errors(tmp_path: Path) -> None:
    broken = {**SWE_BENCH_ROW, "instance_id": "bad__row-1", "base_commit": "not-a-sha"}
    path = tmp_path / "verified.parquet"
    pq.write_table(pa.Table.from_pylist([SWE_BENCH_ROW, broken]), path)
    result = load_dataset_tasks(path, DatasetConfig(format="swe-bench"))
    assert [task.instance_id for task in result.tasks] == ["astropy__astropy-12907"]
    (error,) = result.errors
    assert error.instance_id == "bad__row-1" and error.field == "base_commit"


def test_a_row_missing_a_required_dataset_column_is_reported_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "r2e.jsonl"
    path.write_text(json.dumps({"repo_name": "pandas"}) + "\n")
    result = load_dataset_tasks(path, DatasetConfig(format="r2e-gym"))
    assert not result.tasks and "docker_image" in result.errors[0].message


@pytest.mark.parametrize("fmt", ["swe-bench", "swe-gym", "swe-rebench"])
def test_every_swe_bench_like_format_keeps_the_record_fields(fmt: str) -> None:
    task = task_of(SWE_BENCH_ROW, format=fmt)
    assert task.instance_id == SWE_BENCH_ROW["instance_id"] and task.version == "4.3"
