"""Spec of the run-directory layout: typed records round-trip, JSONL logs survive a torn tail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.events import EventBus, Phase, StepEvent
from rollout.observe.run_dir import JsonlAppender, RunDir, read_jsonl_records
from rollout.observe.run_records import (
    MissingRunFileError,
    RunDirError,
    StepRecord,
    TimeseriesSample,
    event_from_dict,
)

SAMPLE = {
    "t_s": 1.5,
    "engine": "e0",
    "running": 3,
    "waiting": 1,
    "max_running": 8,
    "busy": 1,
    "kv_used_tokens": 100,
    "kv_capacity_tokens": 1000,
    "kv_device_hits": 10,
    "kv_host_hits": 2,
    "kv_misses": 5,
    "recomputed_tokens": 4,
}


def test_step_record_round_trips_through_its_dict() -> None:
    record = StepRecord(3, 12.5, ("g1", "g2"), policy_version=2, staleness=(0, 1), rewards_mean=0.5)

    assert StepRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_a_step_records_its_held_sample_seconds_only_when_the_run_measured_them() -> None:
    record = StepRecord(1, 4.0, ("g1",), held_sample_s={"kv_room": 2.5, "slot": 0.5})
    line = json.loads(json.dumps(record.to_dict()))

    assert line["held_sample_s"] == {"kv_room": 2.5, "slot": 0.5}
    assert StepRecord.from_dict(line) == record
    assert "held_sample_s" not in StepRecord(1, 4.0, ("g1",)).to_dict()
    with pytest.raises(RunDirError, match="held_sample_s must be a mapping"):
        StepRecord.from_dict({**line, "held_sample_s": [2.5]})


def test_step_record_needs_one_staleness_per_group() -> None:
    with pytest.raises(RunDirError, match="one staleness per group"):
        StepRecord(1, 1.0, ("g1", "g2"), staleness=(0,))


def test_step_record_without_a_time_names_the_missing_field() -> None:
    with pytest.raises(RunDirError, match="'t_s'"):
        StepRecord.from_dict({"step": 1, "groups": []})


def test_timeseries_sample_keeps_extra_numeric_keys() -> None:
    sample = TimeseriesSample.from_dict({**SAMPLE, "decode_tokens": 7, "note": "text"})

    assert sample.extra == {"decode_tokens": 7.0}
    assert TimeseriesSample.from_dict(sample.to_dict()) == sample


def test_timeseries_sample_without_a_contract_field_names_it() -> None:
    record = {key: value for key, value in SAMPLE.items() if key != "kv_misses"}

    with pytest.raises(RunDirError, match="kv_misses"):
        TimeseriesSample.from_dict(record)


def test_event_round_trips_through_to_dict() -> None:
    event = StepEvent(Phase.ACT, 1.0, 2.5, "s1", "g1", {"exit_code": 0})

    assert event_from_dict(json.loads(json.dumps(event.to_dict()))) == event


def test_unknown_phase_lists_the_known_phases() -> None:
    with pytest.raises(RunDirError, match="known phases: env_init"):
        event_from_dict({"phase": "nap", "start_s": 0.0, "end_s": 1.0})


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": ', encoding="utf-8")

    assert list(read_jsonl_records(path)) == [{"a": 1}, {"a": 2}]


def test_a_tail_torn_inside_a_multibyte_character_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes('{"a": "é"}\n{"a": "é'.encode()[:-1])  # the crash split the "é"

    assert list(read_jsonl_records(path)) == [{"a": "é"}]


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}', encoding="utf-8")

    assert list(read_jsonl_records(path)) == [{"a": 1}, {"a": 2}]


def test_bad_line_in_the_middle_is_reported_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n', encoding="utf-8")

    with pytest.raises(RunDirError, match=r"log\.jsonl:2"):
        list(read_jsonl_records(path))


def test_two_values_on_one_line_are_reported_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"a": 2} {"b": 3}\n{"a": 4}\n', encoding="utf-8")

    with pytest.raises(RunDirError, match=r"log\.jsonl:2 is not valid JSON"):
        list(read_jsonl_records(path))


def test_bad_record_is_reported_with_file_and_line(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path)
    run_dir.steps_path.write_text('{"step": 1, "t_s": 1, "groups": []}\n{"step": 2}\n')

    with pytest.raises(RunDirError, match=r"steps\.jsonl:2"):
        run_dir.read_steps()


def test_missing_steps_file_says_what_is_missing_and_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(MissingRunFileError, match=r"steps\.jsonl is missing.*first training step"):
        RunDir(tmp_path).read_steps()


def test_empty_steps_file_is_as_good_as_missing(tmp_path: Path) -> None:
    RunDir(tmp_path).steps_path.write_text("")

    with pytest.raises(MissingRunFileError, match="holds no training step"):
        RunDir(tmp_path).read_steps()


def test_optional_files_read_as_empty_when_absent(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path)

    assert (run_dir.read_events(), run_dir.read_timeseries(), run_dir.read_trajectories()) == (
        [],
        [],
        [],
    )


def test_event_log_subscribed_to_the_bus_reads_back_every_event(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "run").create()
    bus = EventBus()
    events = [StepEvent(Phase.GEN, 0.0, 1.0, "s1", "g1"), StepEvent(Phase.ACT, 1.0, 3.0, "s1")]
    with run_dir.open_log("events") as log:
        bus.subscribe(log.append_event)
        for event in events:
            bus.emit(event)

    assert run_dir.read_events() == events


def test_appender_refuses_records_after_close(tmp_path: Path) -> None:
    appender = JsonlAppender(tmp_path / "log.jsonl")
    appender.close()

    with pytest.raises(RunDirError, match="closed"):
        appender.append({"a": 1})


def test_steps_are_read_in_step_order(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path)
    with run_dir.open_log("steps", flush_each_record=True) as log:
        log.append(StepRecord(2, 5.0, ("b",)).to_dict())
        log.append(StepRecord(1, 3.0, ("a",)).to_dict())

    assert [record.step for record in run_dir.read_steps()] == [1, 2]


def test_metrics_are_written_and_read_back(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "new")

    run_dir.write_metrics({"summary": {"mean_t_next_s": 2.0}})

    assert run_dir.read_metrics() == {"summary": {"mean_t_next_s": 2.0}}
    assert not list(run_dir.root.glob("*.tmp"))
