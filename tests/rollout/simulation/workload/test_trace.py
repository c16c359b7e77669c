"""Trace replay: a trace file's scripts replace the drawn ones, exactly; a run converts to one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as parquet
import pytest
from typer.testing import CliRunner

from foundation.config import load_config
from rollout.cli.app import app
from rollout.simulation.workload import SUBMIT_TOOL, SyntheticWorkload, WorkloadConfig
from rollout.simulation.workload.trace import TraceError, load_trace, trace_from_run
from tests.paths import CONFIGS

SHORT = CONFIGS / "simulate" / "short_context.yaml"
WORKLOAD = CONFIGS / "workload" / "short_context.yaml"


def _sample(group: str, index: int, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "group": group,
        "sample": index,
        "prompt_tokens": 100,
        "prefix_tokens": 40,
        "prefix_id": "system",
        "reward": float(index),
        "reset_s": 0.5,
        "turns": [
            {"output_tokens": 10 + index, "observation_tokens": 7, "tool": "shell", "latency_s": 2},
            {"output_tokens": 5, "observation_tokens": 99, "tool": "shell", "latency_s": 9},
        ],
    }
    return {**record, **fields}


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def _workload(trace: Path, group_size: int = 2) -> SyntheticWorkload:
    config = load_config(WorkloadConfig, WORKLOAD, [f"trace={trace}", f"group_size={group_size}"])
    return SyntheticWorkload(config, seed=3)


def test_the_replayed_scripts_are_the_traces_turns_exactly(tmp_path: Path) -> None:
    trace = _write(
        tmp_path / "t.jsonl",
        [_sample("a", 0), _sample("a", 1), _sample("b", 0), _sample("b", 1, prompt_tokens=60)],
    )
    workload = _workload(trace)
    first, second = workload.group(0)
    assert [t.output_tokens for t in first.turns] == [10, 5]
    assert [t.output_tokens for t in second.turns] == [11, 5]
    assert [t.observation_tokens for t in first.turns] == [7, 0]  # the last turn ends it
    assert [t.tool for t in first.turns] == ["shell", SUBMIT_TOOL]
    assert [t.tool_latency_s for t in first.turns] == [2.0, 9.0]
    assert (first.reward, second.reward, first.reset_s) == (0.0, 1.0, 0.5)
    assert len(first.prompt_ids) == 100 and first.prompt_ids == second.prompt_ids
    other = workload.group(1)[1]
    assert len(other.prompt_ids) == 60
    # The shared system prefix is the same tokens in every group; the rest is each group's own.
    assert other.prompt_ids[:40] == first.prompt_ids[:40]
    assert other.prompt_ids[40:] != first.prompt_ids[40:60]


def test_prompt_indices_past_the_trace_replay_it_again_under_new_sessions(tmp_path: Path) -> None:
    trace = _write(tmp_path / "t.jsonl", [_sample("a", 0), _sample("a", 1)])
    workload = _workload(trace)
    again = workload.group(1)
    assert [t.output_tokens for t in again[0].turns] == [10, 5]
    assert again[0].session_id != workload.group(0)[0].session_id


def test_a_parquet_trace_replays_as_its_jsonl_twin(tmp_path: Path) -> None:
    records = [_sample("a", 0), _sample("a", 1)]
    jsonl = _write(tmp_path / "t.jsonl", records)
    table = pa.Table.from_pylist(records)
    parquet.write_table(table, tmp_path / "t.parquet")
    from_jsonl = _workload(jsonl).group(0)
    from_parquet = _workload(tmp_path / "t.parquet").group(0)
    assert from_jsonl == tuple(
        script.__class__(**{**_fields(script), "session_id": script.session_id})
        for script in from_parquet
    )


def _fields(script: Any) -> dict[str, Any]:
    return {name: getattr(script, name) for name in script.__slots__}


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"group": "a", "sample": 0}], r"line 1: prompt_tokens"),
        ([_sample("a", 0, turns=[])], r"line 1: turns"),
        ([_sample("a", 0, bogus=1)], r"line 1: bogus"),
        ([_sample("a", 0, prefix_tokens=500)], r"prefix_tokens 500 exceeds"),
        ([_sample("a", 0), _sample("a", 0)], r"line 2: group a repeats sample 0"),
        ([_sample("a", 0), _sample("a", 2)], r"group a has samples \[0, 2\]"),
        ([_sample("a", 0), _sample("a", 1), _sample("b", 0)], r"groups hold \[1, 2\]"),
    ],
)
def test_a_bad_trace_is_refused_with_where_and_why(
    tmp_path: Path, records: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(TraceError, match=message):
        load_trace(_write(tmp_path / "t.jsonl", records), group_size=2)


def test_a_trace_whose_groups_differ_from_the_runs_group_size_says_so(tmp_path: Path) -> None:
    trace = _write(tmp_path / "t.jsonl", [_sample("a", 0), _sample("a", 1)])
    with pytest.raises(TraceError, match="group_size 4"):
        _workload(trace, group_size=4)
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(TraceError, match="line 1: not JSON"):
        load_trace(tmp_path / "bad.jsonl")
    with pytest.raises(TraceError, match="does not exist"):
        load_trace(tmp_path / "missing.jsonl")


def _signatures(run_dir: Path) -> list[tuple[Any, ...]]:
    signatures = []
    for line in (run_dir / "trajectories.jsonl").read_text().splitlines():
        for trajectory in json.loads(line)["trajectories"]:
            turns = tuple(
                (
                    turn["gen_end"] - turn["gen_start"],
                    (turn["obs_end"] or 0) - (turn["obs_start"] or 0),
                )
                for turn in trajectory["turns"]
            )
            signatures.append((trajectory["prompt_tokens"], turns, trajectory["reward"]))
    return signatures


def _simulate(out: Path, *overrides: str) -> Path:
    small = ["steps=1", "groups_per_step=2", "group_size=2", "trainer.train_time_s=1"]
    args = ["simulate", str(SHORT), *small, "policies=[conductor]", f"out_dir={out}", *overrides]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    (run_dir,) = out.glob("*/conductor")
    return run_dir


def test_a_run_converted_to_a_trace_replays_its_samples_token_for_token(tmp_path: Path) -> None:
    original = _simulate(tmp_path / "a", "write_trajectories=true")
    trace_file = tmp_path / "trace.jsonl"
    done = CliRunner().invoke(app, ["trace", "convert", str(original), "-o", str(trace_file)])
    assert done.exit_code == 0, done.output
    assert "4 samples in 2 groups of 2" in done.output
    replayed = _simulate(
        tmp_path / "b", "write_trajectories=true", f"workload.overrides=[trace={trace_file}]"
    )
    recorded = _signatures(original)
    # Every consumed sample of the replay is one of the recorded samples, turn for turn.
    assert all(signature in recorded for signature in _signatures(replayed))
    show = CliRunner().invoke(app, ["trace", "show", str(trace_file)])
    assert show.exit_code == 0 and "2 groups × 2" in show.output


def _trajectory(group: str, index: int, prompt: list[int], **fields: Any) -> dict[str, Any]:
    turn = {
        "gen_start": 5,
        "gen_end": 9,
        "obs_start": 9,
        "obs_end": 12,
        "tool_name": "bash",
        "act_s": 1.5,
    }
    last = {
        "gen_start": 12,
        "gen_end": 14,
        "obs_start": None,
        "obs_end": None,
        "tool_name": None,
        "act_s": 30.0,
    }
    record = {
        "sample_id": f"{group}-s{index}",
        "group_id": group,
        "sample_index": index,
        "prompt_tokens": len(prompt),
        "token_ids": prompt + [0] * 9,
        "reward": 1.0,
        "truncated": False,
        "infra_error": None,
        "env_init_s": 0.2,
        "turns": [turn, last],
    }
    return {**record, **fields}


def test_the_converter_finds_the_shared_system_prefix_and_leaves_out_failed_groups(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    groups = [
        [_trajectory("g1", 0, [1, 2, 3, 7, 7]), _trajectory("g1", 1, [1, 2, 3, 7, 7])],
        [_trajectory("g2", 0, [1, 2, 3, 8, 9]), _trajectory("g2", 1, [1, 2, 3, 8, 9])],
        [_trajectory("g3", 0, [1, 2, 5, 5, 5]), _trajectory("g3", 1, [1, 2], infra_error="x")],
    ]
    (run / "trajectories.jsonl").write_text(
        "".join(
            json.dumps({"group_id": g[0]["group_id"], "trajectories": g}) + "\n" for g in groups
        )
    )
    samples = trace_from_run(run)
    assert [(s.group, s.sample) for s in samples] == [("g1", 0), ("g1", 1), ("g2", 0), ("g2", 1)]
    assert {(s.prefix_tokens, s.prefix_id) for s in samples} == {(3, "run:run")}
    first = samples[0]
    assert [(t.output_tokens, t.observation_tokens, t.tool, t.latency_s) for t in first.turns] == [
        (4, 3, "bash", 1.5),
        (2, 0, SUBMIT_TOOL, 30.0),
    ]
    assert (first.prompt_tokens, first.reset_s, first.reward) == (5, 0.2, 1.0)
    with pytest.raises(TraceError, match=r"no trajectories\.jsonl"):
        trace_from_run(tmp_path)
