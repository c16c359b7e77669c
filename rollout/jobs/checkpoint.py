"""Durable runs: a checkpoint at every step boundary, and a run directory made ready to resume.

`checkpoint.json` is written atomically (temporary file, fsync, rename) after each training
step: the conductor's state (admission cursor, unconsumed groups, policy version, steps done),
where the run's configs resolve from, and when the last step completed. Resuming trusts only the
checkpoint: `steps.jsonl` is cut back to the steps it counts, and `trajectories.jsonl` keeps only
the groups those steps consumed. Every other group is restarted by the conductor (under a new
attempt, so no sample id repeats), so each sample is consumed exactly once however many times
the run is killed, `kill -9` included.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollout.errors import RolloutError, RunFileWriteError
from rollout.observe.run_dir import RunDir
from rollout.trajectories.writers import UNCONSUMED_JSONL

__all__ = [
    "CHECKPOINT_FILE",
    "RESUME_FILE",
    "Checkpoint",
    "prepare_resume",
    "read_checkpoint",
    "read_resume_info",
    "write_checkpoint",
    "write_resume_info",
]

CHECKPOINT_FILE = "checkpoint.json"
RESUME_FILE = "resume.json"
"""Written first, when the run directory is made: the run's config and where it resolves."""
_VERSION = 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A run's state at the end of training step `steps_done`."""

    steps_done: int
    conductor_state: Mapping[str, Any]
    base_dir: str
    last_step_t_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "steps_done": self.steps_done,
            "conductor": dict(self.conductor_state),
            "base_dir": self.base_dir,
            "last_step_t_s": self.last_step_t_s,
        }


def write_checkpoint(root: Path, checkpoint: Checkpoint) -> Path:
    """Replace `root/checkpoint.json` atomically; a crash leaves the old one or the new one."""
    return _write_atomic(root / CHECKPOINT_FILE, checkpoint.to_dict())


def _write_atomic(path: Path, data: Mapping[str, Any]) -> Path:
    temporary = path.with_name(path.name + ".tmp")
    try:
        with temporary.open("w", encoding="utf-8") as file:
            json.dump(data, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except OSError as exc:  # the old file is intact
        temporary.unlink(missing_ok=True)
        raise RunFileWriteError.of(path, exc) from exc
    return path


def read_checkpoint(root: Path) -> Checkpoint | None:
    """The run's last checkpoint, or None when it crashed before its first step ended.

    Raises:
        RolloutError: the file exists but is not a checkpoint of this release.
    """
    path = root / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != _VERSION:
            raise RolloutError(f"{path} has version {data.get('version')!r}, not {_VERSION}")
        return Checkpoint(
            steps_done=int(data["steps_done"]),
            conductor_state=data["conductor"],
            base_dir=str(data["base_dir"]),
            last_step_t_s=float(data["last_step_t_s"]),
        )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RolloutError(f"{path} is not a readable checkpoint: {exc}") from exc


def write_resume_info(root: Path, config: Mapping[str, Any], base_dir: Path) -> Path:
    """What `--resume` needs before any step exists: the run's config and its base directory."""
    return _write_atomic(root / RESUME_FILE, {"run": dict(config), "base_dir": str(base_dir)})


def read_resume_info(root: Path) -> tuple[Mapping[str, Any], Path]:
    """The run's config and base directory, as `write_resume_info` left them.

    Raises:
        RolloutError: `root` is not a run directory of `conductor run`.
    """
    path = root / RESUME_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data["run"], Path(data["base_dir"])
    except FileNotFoundError as exc:
        raise RolloutError(
            f"{root} holds no {RESUME_FILE}: it is not a run directory of `conductor run`"
        ) from exc
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise RolloutError(f"{path} is damaged: {exc}") from exc


def prepare_resume(root: Path, checkpoint: Checkpoint | None) -> set[str]:
    """Cut the run's records back to the checkpoint; return the group ids already consumed.

    `steps.jsonl` keeps its first `steps_done` steps, `trajectories.jsonl` the groups they
    consumed (a group finished but not consumed, or consumed by a step the checkpoint does not
    count, is run again; `unconsumed.jsonl` goes). events.jsonl and timeseries.jsonl are kept
    as they are.
    """
    run_dir = RunDir(root)
    steps_done = 0 if checkpoint is None else checkpoint.steps_done
    kept_steps = _filter_lines(run_dir.steps_path, lambda record: record["step"] <= steps_done)
    if len(kept_steps) != steps_done:
        raise RolloutError(
            f"{run_dir.steps_path} holds {len(kept_steps)} of the {steps_done} steps the "
            "checkpoint counts; the run directory was changed by hand"
        )
    consumed = {group for _, record in kept_steps for group in record["groups"]}
    _filter_lines(run_dir.trajectories_path, lambda record: record.get("group_id") in consumed)
    # The groups no step consumed are run again: the old copies would only mislead.
    (root / UNCONSUMED_JSONL).unlink(missing_ok=True)
    return consumed


def _filter_lines(
    path: Path, keep: Callable[[dict[str, Any]], bool]
) -> list[tuple[bytes, dict[str, Any]]]:
    """Rewrite `path` (atomically) with the lines whose record `keep` accepts, byte for byte;
    a torn last line goes. Returns what was kept. A missing file stays missing."""
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")[:-1]  # what follows the last newline is torn
    kept = [(line, record) for line in lines if line.strip() and keep(record := json.loads(line))]
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(b"".join(line + b"\n" for line, _ in kept))
    os.replace(temporary, path)
    return kept
