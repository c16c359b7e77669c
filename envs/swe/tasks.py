"""SWE-bench-format task records and their loaders (JSONL, JSON list, Parquet).

A `SWETask` carries the SWE-bench instance fields plus what a locally built image needs: the
test command and test files, an install command, and for tasks of the shipped offline set the
project snapshot they were made from (`project`, `project_tree`; see
`envs.swe.taskgen.snapshot.materialize_repo`). Records from Hugging Face-style datasets load too:
`FAIL_TO_PASS` / `PASS_TO_PASS` may be JSON-encoded strings, unknown columns are ignored.

Loading never stops at the first bad record: `load_tasks` returns the good tasks and one
`TaskLoadError` per bad record (its index, instance id and field); `load_tasks_strict` raises
`TaskSetError` listing them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from foundation.errors import ConductorError

__all__ = [
    "DEFAULT_TEST_CMD",
    "SHIPPED_TASKSET_DIR",
    "SWETask",
    "TaskLoadError",
    "TaskLoadResult",
    "TaskSetError",
    "dump_tasks_jsonl",
    "load_shipped_tasks",
    "load_tasks",
    "load_tasks_strict",
    "parse_task_records",
]

DEFAULT_TEST_CMD = "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider"
"""The SWE-bench pytest command; test files are appended to it."""

SHIPPED_TASKSET_DIR = Path(__file__).resolve().parent / "taskset"
"""The offline task set shipped with the package: `projects/`, `specs/` and `tasks.jsonl`."""

_GIT_ID = r"^[0-9a-f]{40}$"
_LIST_FIELDS = ("FAIL_TO_PASS", "PASS_TO_PASS", "test_files")
_OMITTED_WHEN_DEFAULT = ("test_env_setup", "repo_path", "image")


class TaskSetError(ConductorError, ValueError):
    """A task file cannot be read, or (strict loading) holds invalid records."""


class SWETask(BaseModel):
    """One SWE-bench-style task instance (immutable).

    The first twelve fields are the SWE-bench instance fields; the rest say how to build and
    test the repository locally.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    instance_id: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$",
        description="Unique id, `owner__repo-suffix`; safe in file and image names.",
    )
    repo: str = Field(min_length=1, description="`owner/name` of the repository.")
    base_commit: str = Field(
        pattern=_GIT_ID, description="Commit the agent starts from (the buggy snapshot)."
    )
    problem_statement: str = Field(min_length=1, description="The issue text shown to the agent.")
    patch: str = Field(description="Gold fix: git-style diff of non-test files.")
    test_patch: str = Field(description="Git-style diff that adds the tests which catch the bug.")
    FAIL_TO_PASS: tuple[str, ...] = Field(
        min_length=1, description="Test ids that fail at base_commit and pass with the fix."
    )
    PASS_TO_PASS: tuple[str, ...] = Field(description="Test ids that pass before and after.")
    version: str = Field(description="Groups tasks that share one environment.")
    environment_setup_commit: str = Field(
        description="Commit whose requirements define the environment."
    )
    hints_text: str = Field(default="", description="Optional hints (issue comments).")
    created_at: str = Field(default="", description="ISO 8601 creation time of the issue.")
    project: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$",
        description="Shipped task sets: directory under `projects/` with the fixed repository "
        "(a plain name: no path separators).",
    )
    project_tree: str | None = Field(
        default=None,
        pattern=_GIT_ID,
        description="Git tree id of that directory when the task was generated (drift check).",
    )
    test_cmd: str = Field(
        default=DEFAULT_TEST_CMD, min_length=1, description="Test command, run at the repo root."
    )
    test_files: tuple[str, ...] = Field(
        default=(), description="Test directives appended to `test_cmd` (empty: run all)."
    )
    install_cmd: str = Field(default="", description="Run once at image build; empty: none.")
    test_env_setup: str = Field(
        default="",
        description="Shell lines run before the tests (environment activation, e.g. "
        "`source /opt/miniconda3/bin/activate testbed`); empty: none.",
    )
    repo_path: str | None = Field(
        default=None,
        min_length=1,
        description="Your own tasks, way 1: a local git repository or git bundle file that "
        "holds `base_commit` (relative paths are taken from the task file's directory).",
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        description="Your own tasks, way 2: a prebuilt image whose workdir already holds the "
        "repository at `base_commit` and its environment (SWE-bench / SWE-Gym style).",
    )

    @model_validator(mode="after")
    def _one_repository_source(self) -> SWETask:
        sources = [name for name in ("project", "repo_path", "image") if getattr(self, name)]
        if len(sources) > 1:
            raise ValueError(
                f"give one of project, repo_path or image, not {' and '.join(sources)}"
            )
        return self

    @field_validator(*_LIST_FIELDS, mode="before")
    @classmethod
    def _decode_json_list(cls, value: object) -> object:
        """Accept the JSON-encoded string lists that Hugging Face datasets store."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"is a string but not a JSON list of test ids ({exc})") from exc
            if not isinstance(value, list):
                raise ValueError("is a JSON string but not a JSON list")
        return value

    @field_validator("version", "environment_setup_commit", mode="before")
    @classmethod
    def _number_to_text(cls, value: object) -> object:
        """Datasets sometimes store versions such as `3.0` as numbers."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("hints_text", "created_at", mode="before")
    @classmethod
    def _optional_text(cls, value: object) -> object:
        if value is None:
            return ""
        if isinstance(value, datetime | date):
            return value.isoformat()
        return value

    @property
    def test_command(self) -> str:
        """`test_cmd` followed by the test directives: what the eval script runs."""
        return " ".join([self.test_cmd, *self.test_files])

    @property
    def source_kind(self) -> str:
        """Where the repository comes from: `project`, `repo_path`, `image` or `none`."""
        for name in ("project", "repo_path", "image"):
            if getattr(self, name):
                return name
        return "none"

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict in field order, with lists for the test id fields (optional
        bring-your-own-task fields only when set, so shipped records stay as they were)."""
        record = self.model_dump(mode="json")
        for name in _OMITTED_WHEN_DEFAULT:
            if record.get(name) in (None, ""):
                record.pop(name, None)
        return record


@dataclass(frozen=True, slots=True)
class TaskLoadError:
    """Why one record was rejected.

    `index` is the record's 0-based position in the file; `line` is its 1-based line for JSONL.
    `field` is None when the record as a whole is unusable (not an object, not JSON).
    """

    source: str
    index: int
    instance_id: str | None
    field: str | None
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"record {self.index}" + (f" (line {self.line})" if self.line is not None else "")
        name = f" [{self.instance_id}]" if self.instance_id else ""
        field = f" field {self.field!r}:" if self.field else ""
        return f"{self.source}: {where}{name}:{field} {self.message}"


@dataclass(frozen=True, slots=True)
class TaskLoadResult:
    """The tasks that loaded and the errors of those that did not."""

    tasks: tuple[SWETask, ...]
    errors: tuple[TaskLoadError, ...]

    @property
    def ok(self) -> bool:
        """True when every record loaded."""
        return not self.errors


def parse_task_records(
    records: Iterable[object],
    *,
    source: str = "<records>",
    base_dir: Path | None = None,
    transform: RecordTransform | None = None,
) -> TaskLoadResult:
    """Validate raw records (dicts); a duplicate of an earlier `instance_id` is an error.

    A relative `repo_path` is taken from `base_dir` (the task file's directory) when given.
    """
    collector = _Collector(source, base_dir, transform)
    for index, record in enumerate(records):
        collector.add(index, record)
    return collector.result()


RecordTransform = Callable[[Mapping[str, Any]], Mapping[str, Any]]
"""Turns a dataset row into a task record (`envs.swe.datasets`); raises ValueError if it can't."""


def load_tasks(path: str | Path, *, transform: RecordTransform | None = None) -> TaskLoadResult:
    """Load tasks from a `.jsonl`, `.json` (a list of objects) or `.parquet` file.

    Bad records are reported in `errors` and skipped; the others load. `transform` maps each
    row to a record first (a row it rejects is reported like any bad record).

    Raises:
        TaskSetError: the file is missing, has another suffix, or is not JSON/Parquet at all.
    """
    path = Path(path)
    if not path.is_file():
        raise TaskSetError(f"task file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _load_jsonl(path, transform)
    if suffix == ".json":
        return _load_json(path, transform)
    if suffix == ".parquet":
        return _load_parquet(path, transform)
    raise TaskSetError(f"task file {path} must end in .jsonl, .json or .parquet")


def load_tasks_strict(path: str | Path) -> tuple[SWETask, ...]:
    """Load tasks like `load_tasks`, but raise if any record is bad.

    Raises:
        TaskSetError: lists every bad record with its index, instance id and field.
    """
    result = load_tasks(path)
    if result.errors:
        listing = "\n  ".join(str(error) for error in result.errors)
        raise TaskSetError(
            f"{len(result.errors)} problem(s) in {path}; fix or remove these records:\n  {listing}"
        )
    return result.tasks


def load_shipped_tasks() -> tuple[SWETask, ...]:
    """The shipped offline task set (`taskset/tasks.jsonl`)."""
    return load_tasks_strict(SHIPPED_TASKSET_DIR / "tasks.jsonl")


def dump_tasks_jsonl(tasks: Iterable[SWETask]) -> str:
    """Tasks as JSONL text: one compact, key-ordered object per line (byte-stable)."""
    return "".join(
        json.dumps(task.to_record(), ensure_ascii=False, separators=(",", ":")) + "\n"
        for task in tasks
    )


def _load_jsonl(path: Path, transform: RecordTransform | None) -> TaskLoadResult:
    collector = _Collector(str(path), path.parent, transform)
    text = path.read_text(encoding="utf-8")
    records = (line for line in enumerate(text.splitlines(), start=1) if line[1].strip())
    for index, (line_number, line) in enumerate(records):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            collector.reject(index, None, None, f"is not valid JSON ({exc})", line_number)
            continue
        collector.add(index, record, line_number)
    return collector.result()


def _load_json(path: Path, transform: RecordTransform | None) -> TaskLoadResult:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TaskSetError(f"task file {path} is not valid JSON: {exc}") from exc
    if not isinstance(loaded, list):
        raise TaskSetError(f"task file {path} must hold a JSON list of task objects")
    return parse_task_records(loaded, source=str(path), base_dir=path.parent, transform=transform)


def _load_parquet(path: Path, transform: RecordTransform | None) -> TaskLoadResult:
    import pyarrow.parquet as pq  # heavy; only needed for Parquet files

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise TaskSetError(f"task file {path} is not a readable Parquet file: {exc}") from exc
    return parse_task_records(
        table.to_pylist(), source=str(path), base_dir=path.parent, transform=transform
    )


class _Collector:
    """Validates records one at a time, keeping the good tasks and every error."""

    def __init__(
        self, source: str, base_dir: Path | None = None, transform: RecordTransform | None = None
    ) -> None:
        self._source = source
        self._base_dir = base_dir
        self._transform = transform
        self._tasks: list[SWETask] = []
        self._errors: list[TaskLoadError] = []
        self._seen: set[str] = set()

    def add(self, index: int, record: object, line: int | None = None) -> None:
        if not isinstance(record, Mapping):
            kind = type(record).__name__
            self.reject(index, None, None, f"is a JSON {kind}, not an object", line)
            return
        raw_id = record.get("instance_id")
        instance_id = raw_id if isinstance(raw_id, str) and raw_id else None
        if self._transform is not None:
            try:
                record = self._transform(record)
            except (ValueError, KeyError, TypeError) as exc:
                self.reject(index, instance_id, None, f"cannot be read as a task: {exc}", line)
                return
        fields = dict(record)
        repo_path = fields.get("repo_path")
        if isinstance(repo_path, str) and repo_path and self._base_dir is not None:
            fields["repo_path"] = str(self._base_dir / Path(repo_path).expanduser())
        try:
            task = SWETask.model_validate(fields)
        except ValidationError as exc:
            for error in exc.errors():
                field = ".".join(str(part) for part in error["loc"]) or None
                self.reject(index, instance_id, field, error["msg"], line)
            return
        if task.instance_id in self._seen:
            self.reject(index, instance_id, "instance_id", "duplicates an earlier record", line)
            return
        self._seen.add(task.instance_id)
        self._tasks.append(task)

    def reject(
        self, index: int, instance_id: str | None, field: str | None, message: str, line: int | None
    ) -> None:
        self._errors.append(TaskLoadError(self._source, index, instance_id, field, message, line))

    def result(self) -> TaskLoadResult:
        return TaskLoadResult(tuple(self._tasks), tuple(self._errors))
