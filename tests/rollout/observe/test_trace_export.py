"""`conductor trace export RUN_DIR`: the run as Chrome trace-event JSON that Perfetto's UI
loads, checked by a validator of the format (tests/rollout/observe/trace_event_format.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from harness.events import Phase, StepEvent
from rollout.cli.app import app
from rollout.observe.trace_export import chrome_trace
from tests.paths import CONFIGS
from tests.rollout.observe.trace_event_format import validate_trace


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small simulated run (virtual time: its events, offloads and engine samples)."""
    out = tmp_path_factory.mktemp("runs")
    args = ["simulate", str(CONFIGS / "simulate" / "short_context.yaml"), "steps=2",
            "groups_per_step=2", "group_size=2", "trainer.train_time_s=1", "policies=[conductor]",
            "--out", str(out), "--no-report"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (directory,) = out.glob("*/conductor")
    return directory


def exported(run_dir: Path) -> dict[str, object]:
    result = CliRunner().invoke(app, ["trace", "export", str(run_dir)])
    assert result.exit_code == 0, result.output
    return dict(json.loads((run_dir / "trace.json").read_text()))


def names(trace: dict[str, object], kind: str) -> dict[int, str]:
    events = trace["traceEvents"]
    assert isinstance(events, list)
    return {e["pid"] if kind == "process_name" else e["tid"]: e["args"]["name"]
            for e in events if e["ph"] == "M" and e["name"] == kind}  # fmt: skip


def test_the_export_is_valid_trace_event_json(run_dir: Path) -> None:
    validate_trace(exported(run_dir))


def test_each_sample_engine_and_env_host_has_its_track(run_dir: Path) -> None:
    trace = exported(run_dir)
    events = trace["traceEvents"]
    assert isinstance(events, list)
    processes = names(trace, "process_name")
    assert processes[1] == "samples"
    assert {"engine sim", "env host env pool"} <= set(processes.values())
    sample_ids = {json.loads(line)["sample_id"]
                  for line in (run_dir / "events.jsonl").read_text().splitlines()
                  if json.loads(line).get("sample_id")}  # fmt: skip
    threads = {label.split(" ")[0] for label in names(trace, "thread_name").values()}
    assert threads == sample_ids
    slices = Counter(e["name"] for e in events if e["ph"] == "X")
    assert set(slices) == {"pre_gen", "generate", "pre_act", "tool", "grading"}
    engine = next(pid for pid, name in processes.items() if name == "engine sim")
    on_engine = [e for e in events if e["pid"] == engine]
    assert sum(e["ph"] == "b" for e in on_engine) == slices["generate"]  # every generation
    assert {e["name"] for e in on_engine if e["ph"] == "C"} >= {"requests", "kv occupancy"}


def test_every_env_host_gets_its_own_track() -> None:
    events = [
        StepEvent(Phase.ACT, 1.0, 2.0, "s0", "g0", {"host": "node-a"}),
        StepEvent(Phase.ACT, 1.5, 3.0, "s1", "g0", {"host": "node-b"}),
        StepEvent(Phase.ENV_INIT, 0.0, 0.5, "s1", "g0", {"host": "node-b", "warm": True}),
    ]
    trace = chrome_trace(events)
    validate_trace(trace)
    processes = names(trace, "process_name")
    assert {"env host node-a", "env host node-b"} <= set(processes.values())


def test_the_validator_catches_unnested_slices() -> None:
    """The check can fail: two overlapping phases of one sample are not a valid track."""
    events = [
        StepEvent(Phase.GEN, 0.0, 2.0, "s0", "g0", {}),
        StepEvent(Phase.ACT, 1.0, 3.0, "s0", "g0", {}),
    ]
    with pytest.raises(AssertionError, match="overlap unnested"):
        validate_trace(chrome_trace(events))
    with pytest.raises(jsonschema.ValidationError):
        validate_trace({"traceEvents": [{"name": "x", "ph": "X", "pid": 1, "tid": 1, "ts": 0}]})


def test_a_directory_without_events_fails_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["trace", "export", str(tmp_path)])
    assert result.exit_code == 1 and "holds no step events" in " ".join(result.output.split())
