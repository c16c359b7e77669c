"""Durable runs: checkpoints are atomic, and a run dir is cut back to its checkpoint to resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rollout.errors import RolloutError
from rollout.jobs.checkpoint import (
    Checkpoint,
    prepare_resume,
    read_checkpoint,
    read_resume_info,
    write_checkpoint,
    write_resume_info,
)
from tests.paths import REPO_ROOT


def _write(root: Path, steps: list[list[str]], groups: list[str], *, torn: bool = False) -> None:
    root.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": i + 1, "t_s": float(i), "groups": g}) for i, g in enumerate(steps)]
    (root / "steps.jsonl").write_text("".join(f"{line}\n" for line in lines))
    records = [json.dumps({"group_id": g, "trajectories": []}) for g in groups]
    tail = '{"group_id": "g9", "traj' if torn else ""
    (root / "trajectories.jsonl").write_text("".join(f"{r}\n" for r in records) + tail)


def _checkpoint(steps_done: int) -> Checkpoint:
    return Checkpoint(steps_done, {"version": 1}, "/configs", float(steps_done))


def test_a_checkpoint_round_trips_and_replaces_the_old_one(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path) is None
    write_checkpoint(tmp_path, _checkpoint(1))
    write_checkpoint(tmp_path, _checkpoint(2))
    assert read_checkpoint(tmp_path) == _checkpoint(2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json"]


def test_resume_keeps_only_what_the_checkpoint_counts(tmp_path: Path) -> None:
    """Step 3 was recorded but its checkpoint never written; g4 finished unconsumed; the last
    group line is torn: all three are dropped, to be run again."""
    _write(tmp_path, [["g0"], ["g1"], ["g2"]], ["g0", "g1", "g2", "g4"], torn=True)
    consumed = prepare_resume(tmp_path, _checkpoint(2))
    assert consumed == {"g0", "g1"}
    steps = [json.loads(ln)["step"] for ln in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert steps == [1, 2]
    kept = (tmp_path / "trajectories.jsonl").read_text().splitlines()
    assert [json.loads(line)["group_id"] for line in kept] == ["g0", "g1"]


def test_resume_before_the_first_checkpoint_starts_over(tmp_path: Path) -> None:
    _write(tmp_path, [["g0"]], ["g0", "g1"])
    assert prepare_resume(tmp_path, None) == set()
    assert (tmp_path / "steps.jsonl").read_text() == ""
    assert (tmp_path / "trajectories.jsonl").read_text() == ""


def test_a_run_dir_missing_checkpointed_steps_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, [["g0"]], ["g0"])
    with pytest.raises(RolloutError, match="holds 1 of the 3 steps"):
        prepare_resume(tmp_path, _checkpoint(3))


def test_resume_info_is_there_from_the_start_and_round_trips(tmp_path: Path) -> None:
    with pytest.raises(RolloutError, match="not a run directory"):
        read_resume_info(tmp_path)
    write_resume_info(tmp_path, {"steps": 3}, Path("/configs/run"))
    assert read_resume_info(tmp_path) == ({"steps": 3}, Path("/configs/run"))


def test_a_damaged_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "checkpoint.json").write_text("{not json")
    with pytest.raises(RolloutError, match="not a readable checkpoint"):
        read_checkpoint(tmp_path)


def test_sigkill_at_random_points_then_resume_consumes_every_group_exactly_once() -> None:
    """Fault 2: `kill -9` then a rerun recomputed every finished sample under the same ids."""
    script = REPO_ROOT / "scripts" / "crash_resume.py"
    done = subprocess.run(
        [sys.executable, str(script), "--kills", "2", "--steps", "3", "--seed", "1"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=500, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kills; consumed groups equal the uninterrupted run's: True" in done.stdout
