"""`conductor replay RUN_DIR` on the decisions.jsonl a tiny `conductor simulate` writes."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout.cli.app import app
from tests.paths import CONFIGS

TINY = ["steps=1", "groups_per_step=2", "group_size=2", "trainer.train_time_s=1"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The conductor policy's run directory of one tiny simulated run (made once)."""
    out = tmp_path_factory.mktemp("sim")
    config = CONFIGS / "simulate" / "short_context.yaml"
    args = ["simulate", str(config), *TINY, "policies=[conductor]", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--no-report"])
    assert result.exit_code == 0, result.output
    (run_dir,) = out.glob("*/conductor")
    return run_dir


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    target.mkdir()
    shutil.copy(run_dir / "decisions.jsonl", target / "decisions.jsonl")
    return target


def _squashed(output: str) -> str:
    """The output without whitespace: rich wraps long lines at the terminal width."""
    return "".join(output.split())


def _lines(run_dir: Path) -> list[str]:
    return (run_dir / "decisions.jsonl").read_text(encoding="utf-8").splitlines()


def test_a_simulated_run_replays_identical(recorded: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(recorded)])
    assert result.exit_code == 0, result.output
    lines = _lines(recorded)
    events = sum('"kind":"event"' in line for line in lines)
    notes = sum('"by":"conductor"' in line for line in lines)
    decisions = len(lines) - 1 - events - notes
    assert decisions > 0 and notes > 0  # the conductor's admissions are in the log too
    squashed = _squashed(result.output)
    assert f"{events}events,{decisions}decisions:identical({notes}conductordecisions" in squashed


def test_the_log_records_each_admitted_group_once(recorded: Path) -> None:
    records = [json.loads(line) for line in _lines(recorded)]
    admits = [r["fields"]["group_id"] for r in records if r["kind"] == "admit"]
    started = {r["sample_id"].rsplit("-a", 1)[0] for r in records if r["kind"] == "start"}
    assert admits and len(admits) == len(set(admits))
    assert started <= set(admits)  # every group that generated was admitted first


def test_the_log_records_an_offload_decision_for_each_tool_call(recorded: Path) -> None:
    records = [json.loads(line) for line in _lines(recorded)]
    offloads = Counter(r["fields"]["sample_id"] for r in records if r["kind"] == "offload")
    events = (recorded / "events.jsonl").read_text(encoding="utf-8").splitlines()
    acts = Counter(e["sample_id"] for e in map(json.loads, events) if e["phase"] == "act")
    assert offloads and offloads == acts  # one TOOL_WAIT hint per tool call, each recorded


@pytest.mark.parametrize("field", ["engine", "sample_id"])
def test_a_changed_decision_fails_naming_its_line(
    recorded: Path, tmp_path: Path, field: str
) -> None:
    run_dir = _copy(recorded, tmp_path)
    lines = _lines(run_dir)
    index = next(i for i, line in enumerate(lines) if '"kind":"start"' in line)
    record = json.loads(lines[index])
    record["fields"][field] = "tampered"
    lines[index] = json.dumps(record, separators=(",", ":"))
    (run_dir / "decisions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", str(run_dir)])
    assert result.exit_code == 1
    assert f"decisions.jsonl:{index + 1}" in _squashed(result.output)
    assert "tampered" in result.output  # expected: the recorded (tampered) decision


def test_a_truncated_line_is_a_clear_error(recorded: Path, tmp_path: Path) -> None:
    run_dir = _copy(recorded, tmp_path)
    lines = _lines(run_dir)
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    (run_dir / "decisions.jsonl").write_text("\n".join(lines), encoding="utf-8")
    result = CliRunner().invoke(app, ["replay", str(run_dir)])
    assert result.exit_code == 1
    assert f"line{len(lines)}isnotvalidJSON" in _squashed(result.output)
    assert "truncated" in result.output


def test_a_run_directory_without_the_log_says_what_writes_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(tmp_path)])
    assert result.exit_code == 1
    output = _squashed(result.output)
    assert "conductor.decision_log" in output and "`conductorsimulate`" in output


def test_decision_log_false_writes_no_log(tmp_path: Path) -> None:
    config = CONFIGS / "simulate" / "short_context.yaml"
    overrides = [*TINY, "policies=[conductor]", "conductor.decision_log=false"]
    args = ["simulate", str(config), *overrides, "--out", str(tmp_path), "--no-report"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (run_dir,) = tmp_path.glob("*/conductor")
    assert (run_dir / "steps.jsonl").exists()
    assert not (run_dir / "decisions.jsonl").exists()
