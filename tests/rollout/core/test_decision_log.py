"""The decision log's codec, records and replay (rollout/core/decision_log.py)."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from rollout.core import scheduler_events
from rollout.core.classes import PriorityClass
from rollout.core.config import SchedulerConfig
from rollout.core.decision_log import (
    DECISION_TYPES,
    EVENT_TYPES,
    DecisionLog,
    DecisionLogError,
    decision_kind,
    decode_record,
    encode_dataclass,
    replay_decisions,
)
from rollout.core.priority import PriorityAssignment
from rollout.core.scheduler import RolloutScheduler
from rollout.core.scheduler_events import (
    EngineAdded,
    EngineLoad,
    GenerationFinished,
    PrioritiesChanged,
    SampleAdmitted,
    SchedulerEvent,
)


def _example(hint: Any, salt: int) -> Any:
    """A value of type `hint` that differs from the field defaults."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, __import__("types").UnionType):
        return _example(next(a for a in args if a is not type(None)), salt)
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            members = list(hint)
            return members[salt % len(members)]
        if dataclasses.is_dataclass(hint):
            return _instance(hint, salt)
        if hint is bool:
            return salt % 2 == 0
        if hint is int:
            return 7 + salt
        if hint is float:
            return 0.25 + salt
        if hint is str:
            return f"s{salt}"
    if origin is frozenset:
        return frozenset({_example(args[0], salt), _example(args[0], salt + 1)})
    if origin is tuple:
        return tuple(_example(args[0], salt + i) for i in range(2))
    if origin is not None and issubclass(origin, Mapping):
        return {_example(args[0], salt): _example(args[1], salt)}
    raise AssertionError(f"no example for {hint!r}: extend _example")


def _instance(cls: type[Any], salt: int = 1) -> Any:
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    return cls(**{f.name: _example(hints[f.name], salt + i) for i, f in enumerate(fields)})


def _record(value: Any, kind: str) -> dict[str, Any]:
    return {"kind": kind, "type": type(value).__name__, "fields": encode_dataclass(value)}


def test_the_registries_hold_every_event_and_decision_the_scheduler_module_defines() -> None:
    defined = {
        name
        for name, obj in inspect.getmembers(scheduler_events, inspect.isclass)
        if dataclasses.is_dataclass(obj) and obj.__module__ == scheduler_events.__name__
    }
    assert set(EVENT_TYPES) | set(DECISION_TYPES) | {"EngineLoad"} == defined


@pytest.mark.parametrize("name", sorted(EVENT_TYPES))
def test_every_event_type_survives_a_json_round_trip(name: str) -> None:
    event = _instance(EVENT_TYPES[name])
    record = json.loads(json.dumps(_record(event, "event")))
    assert decode_record(record) == event


@pytest.mark.parametrize("name", sorted(DECISION_TYPES))
def test_every_decision_type_survives_a_json_round_trip(name: str) -> None:
    decision = _instance(DECISION_TYPES[name])
    record = json.loads(json.dumps(_record(decision, decision_kind(name))))
    assert decode_record(record) == decision


def test_enums_are_written_as_their_value_and_sets_as_sorted_lists() -> None:
    admitted = SampleAdmitted("g/0", "g", priority_class=PriorityClass.URGENT)
    assert encode_dataclass(admitted)["priority_class"] == "urgent"
    changed = PrioritiesChanged(PriorityAssignment(critical=frozenset({"b", "a"})))
    assert encode_dataclass(changed)["assignment"]["critical"] == ["a", "b"]


def test_decision_kinds_name_the_known_decisions_and_snake_case_new_ones() -> None:
    assert decision_kind("StartGeneration") == "start"
    assert decision_kind("Preempt") == "preempt"
    assert decision_kind("PriorityChanged") == "priority"
    assert decision_kind("Promote") == "promote"
    assert decision_kind("HoldEngineSlot") == "hold_engine_slot"


def test_an_unknown_type_or_field_is_a_clear_error() -> None:
    with pytest.raises(DecisionLogError, match="unknown decision type 'Teleport'"):
        decode_record({"kind": "start", "type": "Teleport", "fields": {}})
    with pytest.raises(DecisionLogError, match="no field"):
        decode_record({"kind": "event", "type": "ActStarted", "fields": {"colour": 1}})


# -- records and replay -----------------------------------------------------------------------


def _events() -> list[SchedulerEvent]:
    load = EngineLoad(max_running_requests=1, kv_headroom=1.0)
    return [
        EngineAdded("e0", load),
        PrioritiesChanged(PriorityAssignment(critical=frozenset({"g1"}), demand=1)),
        SampleAdmitted("g0/0", "g0", now_s=0.5, priority_class=PriorityClass.LOW),
        SampleAdmitted("g1/0", "g1", now_s=1.0),
        GenerationFinished("g0/0", episode_done=True, now_s=2.0),
        GenerationFinished("g1/0", episode_done=True, now_s=3.0),
    ]


def _record_run(config: SchedulerConfig) -> list[dict[str, Any]]:
    records: list[Mapping[str, Any]] = []
    log = DecisionLog(records.append)
    log.begin(config)
    scheduler = RolloutScheduler(config)
    for event in _events():
        log.event(event)
        for i, decision in enumerate(scheduler.handle(event)):
            log.decision(
                decision, rid=f"{getattr(decision, 'sample_id', '')}/r{i}", policy_version=4
            )
    read_back: list[dict[str, Any]] = json.loads(json.dumps(records))  # as in the file
    return read_back


def test_records_come_in_order_with_the_decisions_annotated() -> None:
    records = _record_run(SchedulerConfig())
    assert [r["seq"] for r in records] == list(range(len(records)))
    assert records[0]["kind"] == "header"
    starts = [r for r in records if r["kind"] == "start"]
    assert starts, "the run must start a generation"
    first = starts[0]
    assert first["type"] == "StartGeneration"
    assert first["engine"] == "e0" and first["rid"] == f"{first['sample_id']}/r0"
    assert first["policy_version"] == 4
    assert first["class"] == ("low" if first["sample_id"] == "g0/0" else "normal")
    assert first["high"] == first["fields"]["high"]
    assert first["t"] == 0.5  # the clock of the event that caused it


def _numbered(records: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return list(enumerate(records, start=1))


def test_a_recorded_run_replays_identical_under_its_recorded_config() -> None:
    config = SchedulerConfig(preemption=False, low_priority_kv_watermark=0.3)
    records = _record_run(config)
    result = replay_decisions(_numbered(records))
    assert result.identical
    assert result.events == len(_events())
    assert result.decisions == sum(r["kind"] not in ("header", "event") for r in records)


def test_a_changed_decision_fails_replay_at_its_line() -> None:
    records = _record_run(SchedulerConfig())
    line, start = next((i, r) for i, r in _numbered(records) if r["kind"] == "start")
    start["fields"]["engine"] = "e9"
    result = replay_decisions(_numbered(records))
    assert not result.identical
    assert result.line == line
    assert result.expected is not None and "e9" in result.expected
    assert result.got is not None and "'e0'" in result.got


def test_a_missing_or_extra_decision_fails_replay() -> None:
    records = _record_run(SchedulerConfig())
    line = next(i for i, r in _numbered(records) if r["kind"] == "start")
    dropped = records[: line - 1] + records[line:]
    assert not replay_decisions(_numbered(dropped)).identical
    extra = [*records[:line], records[line - 1], *records[line:]]
    result = replay_decisions(_numbered(extra))
    assert not result.identical and result.line == line + 1


def test_a_log_without_its_header_is_refused() -> None:
    records = _record_run(SchedulerConfig())[1:]
    with pytest.raises(DecisionLogError, match="header"):
        replay_decisions(_numbered(records))


def test_a_garbled_event_names_its_line() -> None:
    records = _record_run(SchedulerConfig())
    records[2]["fields"] = {"nonsense": True}
    with pytest.raises(DecisionLogError, match=r"^line 3: "):
        replay_decisions(_numbered(records))
