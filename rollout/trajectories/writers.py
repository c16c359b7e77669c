"""Crash-safe trajectory writers (JSONL and Parquet): a group is on disk whole or not at all.

* JSONL: one line per group (``{"group_id": ..., "trajectories": [...]}``), written with a single
  `write`, flushed and (optionally) fsynced. A crash can only tear the last line; readers skip a
  torn last line and a writer reopening the file truncates it before appending.
* Parquet: Parquet files cannot be appended to, and a file without its footer is unreadable, so
  each flush writes a new part file (``part-000000.parquet``, …) under a temporary name, fsyncs
  it and renames it into place (an atomic `os.replace`). Readers ignore temporary files.
* A training run's JSONL (`ConsumedJsonlWriter`): `trajectories.jsonl` holds exactly the
  groups a training step consumed, each line with that `step`; the groups that finished but no
  step consumed go to `unconsumed.jsonl` (`"step": null`) when the run ends, so no file mixes
  what was trained on with what was not (issue 28: 3 of 4 runs did, without saying so).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from rollout.core.config import SinkConfig
from rollout.core.types import Trajectory
from rollout.errors import RunFileWriteError, SinkError, TrajectoryError

__all__ = [
    "UNCONSUMED_JSONL",
    "ConsumedJsonlWriter",
    "JsonlTrajectoryWriter",
    "ParquetTrajectoryWriter",
    "TrajectoryWriter",
    "build_writers",
    "read_jsonl_groups",
    "read_parquet_groups",
]

_JSONL_NAME = "trajectories.jsonl"
UNCONSUMED_JSONL = "unconsumed.jsonl"
"""Beside trajectories.jsonl: the groups that finished but no training step consumed."""
_PARQUET_DIR = "parquet"
_PART_PREFIX = "part-"
_PART_SUFFIX = ".parquet"
_TMP_SUFFIX = ".tmp"


class TrajectoryWriter(Protocol):
    """Persists finished groups."""

    def write_group(self, group: Sequence[Trajectory]) -> None:
        """Persist one whole group (or nothing, if the process dies meanwhile)."""
        ...

    def close(self) -> None:
        """Flush what is buffered and release the file; idempotent."""
        ...


def build_writers(config: SinkConfig) -> list[TrajectoryWriter]:
    """The writers `config.formats` asks for, under `config.directory`."""
    directory = Path(config.directory)
    writers: list[TrajectoryWriter] = []
    for kind in config.formats:
        if kind == "jsonl":
            writers.append(JsonlTrajectoryWriter(directory / _JSONL_NAME, fsync=config.fsync))
        else:
            writers.append(
                ParquetTrajectoryWriter(
                    directory / _PARQUET_DIR,
                    groups_per_file=config.parquet_groups_per_file,
                    fsync=config.fsync,
                )
            )
    return writers


# -- JSONL ------------------------------------------------------------------------------------


class JsonlTrajectoryWriter:
    """Appends one JSON line per group; see the module docstring for crash safety."""

    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        self._path = Path(path)
        self._fsync = fsync
        self._failed = False
        self._path.parent.mkdir(parents=True, exist_ok=True)
        _truncate_torn_tail(self._path)
        self._file = self._path.open("ab")

    @property
    def path(self) -> Path:
        return self._path

    def write_group(self, group: Sequence[Trajectory]) -> None:
        self.write_record(group)

    def write_record(self, group: Sequence[Trajectory], **fields: Any) -> None:
        """Write `group` as one line, with `fields` beside its group id (e.g. `step`)."""
        if self._file.closed:
            raise SinkError(f"{self._path} is closed; create a new writer to append")
        record = {
            "group_id": _group_id(group),
            **fields,
            "trajectories": [trajectory.to_dict() for trajectory in group],
        }
        # orjson: a group of 4 x 20k tokens encodes in 8 ms instead of json's 176 ms, on the
        # event loop's thread (issue 28's soak saw json's encoder hold the loop for seconds).
        line = orjson.dumps(record) + b"\n"
        try:
            self._file.write(line)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
        except OSError as exc:
            self._failed = True
            raise RunFileWriteError.of(self._path, exc) from exc

    def close(self) -> None:
        """Close; after a failed write the unwritten rest is dropped (the error was raised)."""
        if self._file.closed:
            return
        try:
            self._file.close()
        except OSError as exc:
            if not self._failed:
                raise RunFileWriteError.of(self._path, exc) from exc


class ConsumedJsonlWriter:
    """The trajectories of a training run, by consumption; see the module docstring.

    The sink hands it each group when the group completes (`write_group`); it keeps the group
    until the trainer takes it (`consumed`), then writes it to `trajectories.jsonl` with the
    step. At `close` the groups still kept are written to `unconsumed.jsonl`. What it keeps is
    what the sink's ready queue holds anyway (at most `async_factor` batches). After a
    `kill -9` the kept groups are not on disk: a resumed run runs them again.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        self._consumed = JsonlTrajectoryWriter(path, fsync=fsync)
        self._unconsumed_path = Path(path).with_name(UNCONSUMED_JSONL)
        self._fsync = fsync
        self._kept: dict[str, tuple[Trajectory, ...]] = {}
        self._closed = False

    @property
    def path(self) -> Path:
        return self._consumed.path

    def write_group(self, group: Sequence[Trajectory]) -> None:
        if self._closed:
            raise SinkError(f"{self.path} is closed; create a new writer to append")
        self._kept[_group_id(group)] = tuple(group)

    def consumed(self, group_ids: Sequence[str], step: int) -> None:
        """Training step `step` consumed these groups: write them, with the step."""
        for group_id in group_ids:
            group = self._kept.pop(group_id, None)
            if group is not None:
                self._consumed.write_record(group, step=step)

    def close(self) -> None:
        """Write the groups no step consumed to `unconsumed.jsonl`, then close; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._kept:
                unconsumed = JsonlTrajectoryWriter(self._unconsumed_path, fsync=self._fsync)
                try:
                    for group in self._kept.values():
                        unconsumed.write_record(group, step=None)
                finally:
                    unconsumed.close()
                self._kept.clear()
        finally:
            self._consumed.close()


def read_jsonl_groups(path: str | Path) -> Iterator[tuple[Trajectory, ...]]:
    """Yield the complete groups in `path`; a torn last line (a crash mid-write) is skipped."""
    path = Path(path)
    with path.open("rb") as file:
        lines = file.read().split(b"\n")
    # Everything before the last "\n" is complete; the remainder is a torn write or empty.
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            yield tuple(Trajectory.from_dict(item) for item in record["trajectories"])
        except (json.JSONDecodeError, KeyError, TrajectoryError) as exc:
            raise SinkError(f"{path}:{number} is not a valid trajectory group: {exc}") from exc


def _truncate_torn_tail(path: Path) -> None:
    """Cut a partial last line left by a crash so appends start on a fresh line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    with path.open("r+b") as file:
        file.truncate(data.rfind(b"\n") + 1)


# -- Parquet ----------------------------------------------------------------------------------

_TURN_TYPE = pa.struct(
    [
        ("index", pa.int64()),
        ("gen_start", pa.int64()),
        ("gen_end", pa.int64()),
        ("obs_start", pa.int64()),
        ("obs_end", pa.int64()),
        ("finish_reason", pa.string()),
        ("tool_name", pa.string()),
        ("tool_result", pa.string()),
        ("pre_gen_s", pa.float64()),
        ("gen_s", pa.float64()),
        ("pre_act_s", pa.float64()),
        ("act_s", pa.float64()),
        ("preemptions", pa.int64()),
        ("interruptions", pa.int64()),
    ]
)

_PARQUET_SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),
        ("group_id", pa.string()),
        ("prompt_index", pa.int64()),
        ("sample_index", pa.int64()),
        ("token_ids", pa.list_(pa.int64())),
        ("loss_mask", pa.list_(pa.int8())),
        ("logprobs", pa.list_(pa.float64())),
        ("versions", pa.list_(pa.int64())),
        ("prompt_tokens", pa.int64()),
        ("turns", pa.list_(_TURN_TYPE)),
        ("reward", pa.float64()),
        ("terminated", pa.bool_()),
        ("truncated", pa.bool_()),
        ("infra_error", pa.string()),
        ("env_init_s", pa.float64()),
        ("num_preemptions", pa.int64()),
        ("num_interruptions", pa.int64()),
        ("admitted_step", pa.int64()),
        ("attempt", pa.int64()),
        ("info", pa.string()),  # JSON text: free-form values do not fit one Parquet type
    ]
)


class ParquetTrajectoryWriter:
    """Writes groups into atomically renamed part files; see the module docstring."""

    def __init__(
        self, directory: str | Path, *, groups_per_file: int = 1, fsync: bool = True
    ) -> None:
        if groups_per_file < 1:
            raise SinkError(f"groups_per_file must be >= 1, got {groups_per_file}")
        self._directory = Path(directory)
        self._groups_per_file = groups_per_file
        self._fsync = fsync
        self._directory.mkdir(parents=True, exist_ok=True)
        self._next_part = _next_part_number(self._directory)
        self._buffer: list[Sequence[Trajectory]] = []
        self._closed = False

    @property
    def directory(self) -> Path:
        return self._directory

    def write_group(self, group: Sequence[Trajectory]) -> None:
        if self._closed:
            raise SinkError(f"the Parquet writer for {self._directory} is closed")
        _group_id(group)
        self._buffer.append(tuple(group))
        if len(self._buffer) >= self._groups_per_file:
            self.flush()

    def flush(self) -> None:
        """Write the buffered groups as one part file now."""
        if not self._buffer:
            return
        rows = [_parquet_row(t) for group in self._buffer for t in group]
        table = pa.Table.from_pylist(rows, schema=_PARQUET_SCHEMA)
        final = self._directory / f"{_PART_PREFIX}{self._next_part:06d}{_PART_SUFFIX}"
        temporary = final.with_name(final.name + _TMP_SUFFIX)
        pq.write_table(table, temporary)
        if self._fsync:
            _fsync_path(temporary)
        os.replace(temporary, final)
        if self._fsync:
            _fsync_path(self._directory)
        self._next_part += 1
        self._buffer.clear()

    def close(self) -> None:
        if not self._closed:
            self.flush()
            self._closed = True


def read_parquet_groups(directory: str | Path) -> list[tuple[Trajectory, ...]]:
    """Every group in the complete part files of `directory`, in write order."""
    groups: dict[str, list[Trajectory]] = {}
    for part in sorted(Path(directory).glob(f"{_PART_PREFIX}*{_PART_SUFFIX}")):
        try:
            rows = pq.read_table(part).to_pylist()
        except (OSError, pa.ArrowInvalid) as exc:
            raise SinkError(f"{part} is not a readable Parquet part: {exc}") from exc
        for row in rows:
            row["info"] = json.loads(row["info"]) if row["info"] else {}
            trajectory = Trajectory.from_dict(row)
            groups.setdefault(trajectory.group_id, []).append(trajectory)
    return [tuple(group) for group in groups.values()]


def _parquet_row(trajectory: Trajectory) -> dict[str, Any]:
    row = trajectory.to_dict()
    row["info"] = json.dumps(row["info"], separators=(",", ":"))
    return row


def _next_part_number(directory: Path) -> int:
    numbers = [
        int(path.name[len(_PART_PREFIX) : -len(_PART_SUFFIX)])
        for path in directory.glob(f"{_PART_PREFIX}*{_PART_SUFFIX}")
        if path.name[len(_PART_PREFIX) : -len(_PART_SUFFIX)].isdigit()
    ]
    return max(numbers, default=-1) + 1


def _fsync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _group_id(group: Sequence[Trajectory]) -> str:
    if not group:
        raise SinkError("cannot write an empty group")
    group_ids = {trajectory.group_id for trajectory in group}
    if len(group_ids) != 1:
        raise SinkError(f"a group must hold one group_id, got {sorted(group_ids)}")
    return group[0].group_id
