"""Rows of public SWE datasets -> `SWETask` records (pure), for files a user downloaded.

Each public dataset names its columns its own way and leaves out what its harness knows by
convention (the image name, the test command, the conda activation). `DatasetConfig` says which
dataset a file comes from and fills in the conventions, per repository where they differ;
`load_dataset_tasks` loads the file with the same per-record errors as `load_tasks`. The column
facts and their sources are in `docs/swe.md` ("Datasets").

* `conductor` / `swe-bench` (Lite, Verified): the SWE-bench columns; images
  `swebench/sweb.eval.x86_64.<id, __ as _1776_>:latest`.
* `swe-gym`: SWE-bench columns without `environment_setup_commit`; images
  `xingyaoww/sweb.eval.x86_64.<id, __ as _s_>:latest`.
* `swe-rebench`: SWE-bench columns plus `install_config` (its `test_cmd`, a string or a list
  whose last item runs) and the image in `image_name` or `docker_image`.
* `r2e-gym`: `repo_name`, `docker_image`, `commit_hash`, `parsed_commit_content` (JSON with
  `old_commit_hash`), `execution_result_content` (JSON with the old commit's test output),
  `expected_output_json` (test -> status after the fix); FAIL_TO_PASS / PASS_TO_PASS are derived.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import Field

from envs.swe.grading import paths_in_patch
from envs.swe.grading_log import PASSING_STATUSES, parse_pytest_log
from envs.swe.tasks import TaskLoadResult, load_tasks
from foundation.config import FrozenConfig

__all__ = ["DatasetConfig", "DatasetFormat", "RepoSettings", "dataset_row", "load_dataset_tasks"]

DatasetFormat = Literal["conductor", "swe-bench", "swe-gym", "swe-rebench", "r2e-gym"]
CONDA_ACTIVATE = "source /opt/miniconda3/bin/activate && conda activate testbed"
_IMAGE_TEMPLATES: Mapping[str, str] = {
    "swe-bench": "swebench/sweb.eval.x86_64.{id_1776}:latest",
    "swe-gym": "xingyaoww/sweb.eval.x86_64.{id_s}:latest",
    "swe-rebench": "swerebench/sweb.eval.x86_64.{id_1776}:latest",
}
_PASSING = frozenset(str(status) for status in PASSING_STATUSES)


class RepoSettings(FrozenConfig):
    """How one repository's tests run in its images (overrides the dataset's defaults)."""

    test_cmd: str | None = Field(None, description="test command (test files are appended)")
    test_env_setup: str | None = Field(None, description="shell lines run before the tests")


class DatasetConfig(FrozenConfig):
    """Which dataset a task file comes from, and the conventions its rows leave out."""

    format: DatasetFormat = Field(
        "conductor", description="column layout of the file (conductor = our own SWETask records)"
    )
    use_images: bool = Field(
        True,
        description="run each task in the dataset's prebuilt image (way 2); false: leave `image` "
        "unset so the task is built from `repo_path` instead",
    )
    image_template: str | None = Field(
        None,
        description="image name with {id} / {id_1776} / {id_s} (the instance id with __ kept, "
        "as _1776_ or as _s_, lower case); default: the dataset's published naming",
    )
    repo_path_template: str | None = Field(
        None,
        description="local repository or bundle per task, with {repo} (owner/name) and {name} "
        "(e.g. `checkouts/{name}`); relative to the task file",
    )
    test_cmd: str = Field("pytest -rA", description="test command when a row gives none")
    test_env_setup: str = Field(
        CONDA_ACTIVATE, description="shell lines before the tests, for the datasets' images"
    )
    repos: dict[str, RepoSettings] = Field(
        default_factory=dict, description="per repository (owner/name) test settings"
    )


def load_dataset_tasks(path: str | Path, config: DatasetConfig) -> TaskLoadResult:
    """Load a downloaded dataset file (JSONL / JSON / Parquet) as tasks, bad rows reported."""
    if config.format == "conductor":
        return load_tasks(path)
    return load_tasks(path, transform=lambda row: dataset_row(row, config))


def dataset_row(row: Mapping[str, Any], config: DatasetConfig) -> dict[str, Any]:
    """One dataset row as a `SWETask` record.

    Raises:
        ValueError: a column the dataset must have is missing or malformed (says which).
    """
    converters: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
        "swe-bench": _swe_bench,
        "swe-gym": _swe_bench,
        "swe-rebench": _swe_rebench,
        "r2e-gym": _r2e_gym,
    }
    record = converters[config.format](row)
    repo = str(record.get("repo", ""))
    settings = config.repos.get(repo, RepoSettings())
    # The repository's settings beat the row's, which beat the dataset's defaults.
    if settings.test_cmd is not None:
        record["test_cmd"] = settings.test_cmd
    record.setdefault("test_cmd", config.test_cmd)
    if settings.test_env_setup is not None:
        record["test_env_setup"] = settings.test_env_setup
    record.setdefault("test_env_setup", config.test_env_setup)
    record.setdefault("test_files", _test_directives(str(record.get("test_patch", ""))))
    if config.use_images:
        template = config.image_template or _IMAGE_TEMPLATES.get(config.format)
        if not record.get("image") and template:
            record["image"] = _image_name(template, str(record.get("instance_id", "")))
    else:
        record.pop("image", None)
        record["test_env_setup"] = settings.test_env_setup or ""
    if config.repo_path_template and not record.get("image"):
        name = repo.rsplit("/", 1)[-1]
        record["repo_path"] = config.repo_path_template.format(repo=repo, name=name)
    return record


def _swe_bench(row: Mapping[str, Any]) -> dict[str, Any]:
    record = dict(row)
    record.setdefault("environment_setup_commit", record.get("base_commit", ""))
    record.setdefault("version", "")
    return record


def _swe_rebench(row: Mapping[str, Any]) -> dict[str, Any]:
    record = _swe_bench(row)
    install = record.pop("install_config", None)
    if isinstance(install, str):
        install = json.loads(install)
    if isinstance(install, Mapping) and install.get("test_cmd"):
        command = install["test_cmd"]
        record["test_cmd"] = command[-1] if isinstance(command, list) else str(command)
    image = record.get("image_name") or record.get("docker_image")
    if image:
        record["image"] = str(image)
    return record


def _r2e_gym(row: Mapping[str, Any]) -> dict[str, Any]:
    for column in ("repo_name", "docker_image", "commit_hash", "parsed_commit_content"):
        if not row.get(column):
            raise ValueError(f"R2E-Gym row has no {column!r} column")
    commit = _json_column(row, "parsed_commit_content")
    expected = _json_column(row, "expected_output_json")
    results = _json_column(row, "execution_result_content")
    before = parse_pytest_log(str(results.get("old_commit_res_stdout", "")))
    passing_after = [test for test, status in expected.items() if str(status) in _PASSING]
    base = str(commit.get("old_commit_hash", ""))
    return {
        "instance_id": f"{row['repo_name']}__{str(row['commit_hash'])[:12]}",
        "repo": str(row["repo_name"]),
        "base_commit": base,
        "problem_statement": str(row.get("problem_statement", "")),
        "patch": "",
        "test_patch": "",
        "FAIL_TO_PASS": [t for t in passing_after if str(before.get(t, "")) not in _PASSING],
        "PASS_TO_PASS": [t for t in passing_after if str(before.get(t, "")) in _PASSING],
        "version": "",
        "environment_setup_commit": base,
        "image": str(row["docker_image"]),
        "test_cmd": ".venv/bin/python -m pytest -rA r2e_tests",
        "test_env_setup": "[ -e r2e_tests ] || ln -s /r2e_tests r2e_tests",
        "test_files": [],
    }


def _json_column(row: Mapping[str, Any], column: str) -> dict[str, Any]:
    value = row.get(column)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"column {column!r} is not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ValueError(f"column {column!r} is not a JSON object")
    return value


def _test_directives(test_patch: str) -> list[str]:
    """What SWE-bench appends to a pytest command: the Python files the test patch touches."""
    return [path for path in paths_in_patch(test_patch) if PurePosixPath(path).suffix == ".py"]


def _image_name(template: str, instance_id: str) -> str:
    return template.format(
        id=instance_id.lower(),
        id_1776=instance_id.replace("__", "_1776_").lower(),
        id_s=instance_id.replace("__", "_s_").lower(),
    )
