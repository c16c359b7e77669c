"""The run-directory layout: where a run's files live, and reading and appending its JSONL logs.

One run writes one directory::

    RUN_DIR/
      config.yaml          resolved configuration (written by the conductor)
      events.jsonl         one `StepEvent.to_dict()` per line
      trajectories.jsonl   the sink's JSONL writer output (one line per group; in a training
                           run, the groups a step consumed, each with its `step`)
      unconsumed.jsonl     a training run's groups that finished but no step consumed
      steps.jsonl          one `StepRecord` per training step
      timeseries.jsonl     one `TimeseriesSample` per engine every sample interval
      decisions.jsonl      every scheduler event and decision (rollout/core/decision_log.py)
      metrics.json         the summary computed from the above (rollout/observe/report.py)
      report.md, plots/    the run report (rollout/observe/report.py)

Times are seconds on the run's clock (virtual time in simulation, loop time in real runs).
The per-line records are typed in `rollout.observe.run_records`. JSONL readers tolerate a torn last
line (a crash mid-write) and report any other bad line with its file and line number. Writers
append whole lines, so a reader never sees half a record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Literal, TypeVar

from harness.events import StepEvent
from harness.gc_pause import paused_gc
from rollout.core.types import Trajectory
from rollout.errors import RunFileWriteError, SinkError
from rollout.observe.run_records import (
    MissingRunFileError,
    RunDirError,
    StepRecord,
    TimeseriesSample,
    event_from_dict,
)
from rollout.trajectories.writers import read_jsonl_groups

__all__ = [
    "CONFIG_FILE",
    "DECISIONS_FILE",
    "EFFECTIVE_CONFIG_FILE",
    "EVENTS_FILE",
    "HEALTH_FILE",
    "METRICS_FILE",
    "PLOTS_DIR",
    "REPORT_FILE",
    "STEPS_FILE",
    "TIMESERIES_FILE",
    "TRAJECTORIES_FILE",
    "JsonlAppender",
    "RunDir",
    "read_jsonl_records",
]

CONFIG_FILE = "config.yaml"
EFFECTIVE_CONFIG_FILE = "effective_config.yaml"  # every setting with its origin (the plan)
EVENTS_FILE = "events.jsonl"
TRAJECTORIES_FILE = "trajectories.jsonl"
STEPS_FILE = "steps.jsonl"
TIMESERIES_FILE = "timeseries.jsonl"
DECISIONS_FILE = "decisions.jsonl"
METRICS_FILE = "metrics.json"
HEALTH_FILE = "health.json"  # scheduler-health figures (rollout/jobs/run_health.py)
REPORT_FILE = "report.md"
PLOTS_DIR = "plots"

LogName = Literal["events", "steps", "timeseries", "decisions"]
_LOG_FILES: Mapping[str, str] = MappingProxyType(
    {
        "events": EVENTS_FILE,
        "steps": STEPS_FILE,
        "timeseries": TIMESERIES_FILE,
        "decisions": DECISIONS_FILE,
    }
)


# -- JSONL I/O --------------------------------------------------------------------------------

_RecordT = TypeVar("_RecordT")


def read_jsonl_records(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of `path`, one per line; blank lines and a torn last line skipped.

    A last line without its newline is kept if it parses (a writer that never wrote the final
    newline) and skipped otherwise (a crash mid-write). Any other bad line raises `RunDirError`.
    """
    for _, record in _numbered_records(path):
        yield record


def _numbered_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("rb") as file:
        data = file.read()
    lines = _split_lines(data)
    tail = lines.pop()
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, _parse_line(path, number, line)
    if tail.strip():
        try:
            record = json.loads(tail)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return  # torn by a crash mid-write (perhaps inside a multi-byte character)
        if isinstance(record, dict):
            yield len(lines) + 1, record


def _split_lines(data: bytes) -> list[Any]:
    """The lines as str (json then skips its per-line encoding detection, most of its cost
    here), or as bytes when the file is not valid UTF-8 (a torn tail): parsed one by one."""
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return data.split(b"\n")


_DECODER = json.JSONDecoder()
# One encoder for every record: `json.dumps` with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def _loads(line: bytes | str) -> Any:
    """`json.loads` of one log line; a str that starts with its value goes straight to the
    decoder (`loads` adds two regex scans and two calls per line: a third of reading a log)."""
    if isinstance(line, bytes) or line[:1] not in ("{", "["):
        return json.loads(line)
    record, end = _DECODER.raw_decode(line)
    if end != len(line) and line[end:].strip():
        raise json.JSONDecodeError("Extra data", line, end)
    return record


def _parse_line(path: Path, number: int, line: bytes | str) -> dict[str, Any]:
    try:
        record = _loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}:{number} is not valid JSON ({exc}); fix or remove it") from exc
    if not isinstance(record, dict):
        raise RunDirError(f"{path}:{number} holds a {type(record).__name__}, not a JSON object")
    return record


def _read_typed(path: Path, parse: Callable[[Mapping[str, Any]], _RecordT]) -> list[_RecordT]:
    records = []
    with paused_gc():  # hundreds of thousands of new objects, all kept: nothing to collect
        for number, raw in _numbered_records(path):
            try:
                records.append(parse(raw))
            except RunDirError as exc:
                raise RunDirError(f"{path}:{number}: {exc}") from exc
    return records


class JsonlAppender:
    """Appends one JSON object per line to a run-directory log; a context manager.

    Each record is written with one `write` call, so the file only ever ends in a torn line if
    the process dies mid-write (readers skip it). `flush_each_record` trades speed for
    durability: set it for the steps log, leave it off for the high-rate event log.
    """

    def __init__(self, path: Path, *, flush_each_record: bool = False) -> None:
        self._path = path
        self._flush_each_record = flush_each_record
        self._failed = False
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    @property
    def path(self) -> Path:
        return self._path

    def append(self, record: Mapping[str, Any]) -> None:
        """Write `record` as one line (values JSON cannot hold are written as strings)."""
        if self._file.closed:
            raise RunDirError(f"{self._path} is closed; open a new appender to add records")
        try:
            self._file.write(_ENCODER.encode(record) + "\n")
            if self._flush_each_record:
                self._file.flush()
        except OSError as exc:
            self._failed = True
            raise RunFileWriteError.of(self._path, exc) from exc

    def append_event(self, event: StepEvent, origin_s: float = 0.0) -> None:
        """Write a step event with its times relative to `origin_s`; pass this method to
        `EventBus.subscribe` to record times as they are."""
        record = event.to_dict()
        record["start_s"] -= origin_s
        record["end_s"] -= origin_s
        self.append(record)

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as exc:
            self._failed = True
            raise RunFileWriteError.of(self._path, exc) from exc

    def close(self) -> None:
        """Flush and close; idempotent. After a failed write, what could not be written is
        dropped quietly (the error was raised already; a resume cuts the file back)."""
        if self._file.closed:
            return
        try:
            self._file.close()
        except OSError as exc:
            if not self._failed:
                raise RunFileWriteError.of(self._path, exc) from exc

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


# -- the directory ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunDir:
    """The files of one run under `root`; readers return [] for optional files that are absent."""

    root: Path

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def effective_config_path(self) -> Path:
        return self.root / EFFECTIVE_CONFIG_FILE

    @property
    def events_path(self) -> Path:
        return self.root / EVENTS_FILE

    @property
    def trajectories_path(self) -> Path:
        return self.root / TRAJECTORIES_FILE

    @property
    def steps_path(self) -> Path:
        return self.root / STEPS_FILE

    @property
    def timeseries_path(self) -> Path:
        return self.root / TIMESERIES_FILE

    @property
    def metrics_path(self) -> Path:
        return self.root / METRICS_FILE

    @property
    def report_path(self) -> Path:
        return self.root / REPORT_FILE

    @property
    def plots_dir(self) -> Path:
        return self.root / PLOTS_DIR

    def create(self) -> RunDir:
        """Make the directory (and its parents) if needed; returns self."""
        self.root.mkdir(parents=True, exist_ok=True)
        return self

    def open_log(self, name: LogName, *, flush_each_record: bool = False) -> JsonlAppender:
        """An appender for events.jsonl, steps.jsonl or timeseries.jsonl."""
        return JsonlAppender(self.root / _LOG_FILES[name], flush_each_record=flush_each_record)

    def read_steps(self) -> list[StepRecord]:
        """The training steps in step order; raises `MissingRunFileError` if there are none."""
        if not self.steps_path.exists():
            raise MissingRunFileError(
                f"{self.steps_path} is missing: no training step was recorded in {self.root}. "
                "The conductor writes one line per step when it hands a batch to the trainer; "
                "check the path, or let the run reach its first training step."
            )
        steps = sorted(_read_typed(self.steps_path, StepRecord.from_dict), key=lambda s: s.step)
        if not steps:
            raise MissingRunFileError(
                f"{self.steps_path} holds no training step, so T_next cannot be measured; "
                "let the run reach its first training step"
            )
        return steps

    def read_events(self) -> list[StepEvent]:
        """Every step event, in file order ([] without events.jsonl)."""
        if not self.events_path.exists():
            return []
        return _read_typed(self.events_path, event_from_dict)

    def read_timeseries(self) -> list[TimeseriesSample]:
        """Every engine sample, in file order ([] without timeseries.jsonl)."""
        if not self.timeseries_path.exists():
            return []
        return _read_typed(self.timeseries_path, TimeseriesSample.from_dict)

    def read_trajectories(self) -> list[Trajectory]:
        """Every trajectory of every complete group ([] without trajectories.jsonl)."""
        if not self.trajectories_path.exists():
            return []
        try:
            return [t for group in read_jsonl_groups(self.trajectories_path) for t in group]
        except SinkError as exc:
            raise RunDirError(str(exc)) from exc

    def write_metrics(self, metrics: Mapping[str, Any]) -> Path:
        """Write metrics.json atomically (a temporary file renamed into place)."""
        self.create()
        temporary = self.metrics_path.with_name(METRICS_FILE + ".tmp")
        temporary.write_text(json.dumps(metrics, indent=2, sort_keys=False) + "\n", "utf-8")
        os.replace(temporary, self.metrics_path)
        return self.metrics_path

    def read_metrics(self) -> dict[str, Any]:
        """metrics.json as written by `write_metrics`."""
        try:
            record = json.loads(self.metrics_path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise MissingRunFileError(
                f"{self.metrics_path} is missing; run `conductor report {self.root}` first"
            ) from exc
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{self.metrics_path} is not valid JSON: {exc}") from exc
        if not isinstance(record, dict):
            raise RunDirError(f"{self.metrics_path} must hold a JSON object")
        return record
