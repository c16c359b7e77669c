"""The decision log: every event the scheduler heard and every decision it made, as records.

`DecisionLog` turns what `Dispatcher.report` feeds the pure `RolloutScheduler` (events) and what
it answers (decisions) into plain JSON-able dicts, handed in order to a writer (the run
directory's ``decisions.jsonl``). `replay_decisions` feeds the recorded events through a fresh
scheduler built from the recorded config and says whether it answers the same decisions.

Records, one per line::

    {"seq": 0, "kind": "header", "format": 1, "scheduler_config": {...}}
    {"seq": 1, "t": 0.0, "kind": "event", "type": "SampleAdmitted", "fields": {...}}
    {"seq": 2, "t": 0.0, "kind": "start", "type": "StartGeneration", "fields": {...},
     "sample_id": "g0/0", "rid": "g0/0/…", "engine": "e0", "class": "normal", "high": true,
     "policy_version": 0, "reason": null}

`type` and `fields` are the decision itself (all that replay compares); the other keys annotate
it for a reader (the request id, the sample's class, its priority, the policy version).

The conductor's own decisions, which no scheduler event leads to, are *notes* (`note`), one
record each, with `"by": "conductor"` and a kind from `CONDUCTOR_KINDS`::

    {"seq": 7, "t": 0.0, "kind": "admit", "by": "conductor", "fields": {"group_id": "g0", ...}}
    {"seq": 90, "t": 3.0, "kind": "truncate", "by": "conductor",
     "fields": {"sample_id": "g0/1", "reason": "deadline"}}
    {"seq": 91, "t": 3.0, "kind": "cancel", "by": "conductor",
     "fields": {"sample_id": "g3/0", "rid": "…", "held": true, "reason": "deadline: …"}}
    {"seq": 95, "t": 4.2, "kind": "offload", "by": "conductor",
     "fields": {"sample_id": "g1/2", "engine": "sim-0", "high": false, "tool": "bash", …}}

Replay counts notes and skips them (they do not come from the scheduler).

The codec is generic over the dataclass fields of the `SchedulerEvent` and `Decision` unions:
a new event or decision type, or a new field, is recorded without changes here. Enums are
written as their value, frozensets as sorted lists, mappings as objects. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rollout.core.config import SchedulerConfig
from rollout.core.scheduler import RolloutScheduler
from rollout.core.scheduler_events import Decision, SampleAdmitted, SchedulerEvent
from rollout.errors import RolloutError

__all__ = [
    "CONDUCTOR_KINDS",
    "DECISION_TYPES",
    "EVENT_TYPES",
    "FORMAT",
    "DecisionLog",
    "DecisionLogError",
    "ReplayResult",
    "decision_kind",
    "decode_record",
    "encode_dataclass",
    "replay_decisions",
]

FORMAT = 1
"""Version of the record layout; bump it when a reader could misread an older log."""

EVENT_TYPES: Mapping[str, type[Any]] = types.MappingProxyType(
    {cls.__name__: cls for cls in typing.get_args(SchedulerEvent)}
)
DECISION_TYPES: Mapping[str, type[Any]] = types.MappingProxyType(
    {cls.__name__: cls for cls in typing.get_args(Decision)}
)

_KINDS = {"StartGeneration": "start", "Preempt": "preempt", "PriorityChanged": "priority"}

CONDUCTOR_KINDS = frozenset({"admit", "truncate", "cancel", "offload", "shed"})
"""Kinds of the conductor's own decisions (`DecisionLog.note`): a group admitted, a sample
truncated at a step deadline, a generation cancelled because it cannot help the step, a
session's KV handed to the KV manager for offload while its tool runs (the TOOL_WAIT hint), a
live group shed by a polled live limit and run again from scratch."""


class DecisionLogError(RolloutError, ValueError):
    """A decision log that cannot be read (bad record, unknown type, missing header)."""


def decision_kind(decision_type: str) -> str:
    """The record's `kind`: start, preempt, priority, or the type's name in snake case
    (`Promote` -> promote) for any other decision."""
    kind = _KINDS.get(decision_type)
    if kind is not None:
        return kind
    return re.sub(r"(?<!^)(?=[A-Z])", "_", decision_type).lower()


# -- the codec --------------------------------------------------------------------------------


_FIELDS: dict[type[Any], tuple[str, ...]] = {}
_HINTS: dict[type[Any], dict[str, Any]] = {}


def _init_fields(cls: type[Any]) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    return names


def _hints(cls: type[Any]) -> Mapping[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        if isinstance(value, enum.Enum):
            return value.value
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode_dataclass(value)
    if isinstance(value, frozenset | set):
        return sorted(_encode(v) for v in value)
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    raise DecisionLogError(f"cannot record a {type(value).__name__} ({value!r})")


def encode_dataclass(value: Any) -> dict[str, Any]:
    """`value`'s init fields as a JSON-able dict (nested dataclasses as dicts)."""
    return {name: _encode(getattr(value, name)) for name in _init_fields(type(value))}


def _decode(hint: Any, raw: Any) -> Any:
    if raw is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return _decode(options[0], raw) if len(options) == 1 else raw
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return hint(raw)
        if dataclasses.is_dataclass(hint):
            return _decode_dataclass(hint, raw)
        if hint is float and isinstance(raw, int):
            return float(raw)
        return raw
    args = typing.get_args(hint)
    if origin in (frozenset, set):
        return frozenset(_decode(args[0], v) for v in raw) if args else frozenset(raw)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in raw)
        return tuple(_decode(a, v) for a, v in zip(args, raw, strict=False)) if args else tuple(raw)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        value_hint = args[1] if len(args) == 2 else Any
        return {k: _decode(value_hint, v) for k, v in raw.items()}
    return raw


def _decode_dataclass(cls: type[Any], raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise DecisionLogError(f"{cls.__name__} needs an object of fields, got {raw!r}")
    hints = _hints(cls)
    known = _init_fields(cls)
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise DecisionLogError(f"{cls.__name__} has no field(s) {unknown}")
    try:
        return cls(**{name: _decode(hints[name], raw[name]) for name in known if name in raw})
    except (TypeError, ValueError) as exc:
        raise DecisionLogError(f"cannot rebuild {cls.__name__} from {dict(raw)}: {exc}") from exc


def decode_record(record: Mapping[str, Any]) -> Any:
    """The event or decision an event/decision record holds (`kind` "event" -> an event)."""
    registry = EVENT_TYPES if record.get("kind") == "event" else DECISION_TYPES
    name = record.get("type")
    cls = registry.get(name) if isinstance(name, str) else None
    if cls is None:
        what = "event" if registry is EVENT_TYPES else "decision"
        raise DecisionLogError(
            f"unknown {what} type {name!r}; known: {', '.join(sorted(registry))}"
        )
    return _decode_dataclass(cls, record.get("fields", {}))


# -- recording --------------------------------------------------------------------------------


class DecisionLog:
    """Turns events and decisions into records handed to `write`, in order (see module doc).

    Call `begin(config)` once before the first event; `Dispatcher.report` calls `event` and
    `decision`.
    """

    def __init__(self, write: Callable[[Mapping[str, Any]], None]) -> None:
        self._write = write
        self._seq = 0
        self._t = 0.0
        self._classes: dict[str, str] = {}  # sample -> its PriorityClass value
        self._high: dict[str, bool] = {}  # sample -> its latest priority
        self.events = 0
        self.decisions = 0
        self.notes = 0

    def begin(self, config: SchedulerConfig) -> None:
        self._emit({"kind": "header", "format": FORMAT, "scheduler_config": config.model_dump()})

    def event(self, event: SchedulerEvent) -> None:
        self._t = float(getattr(event, "now_s", self._t))
        if isinstance(event, SampleAdmitted):
            self._classes[event.sample_id] = _encode(event.priority_class)
        self.events += 1
        self._emit(
            {
                "t": self._t,
                "kind": "event",
                "type": type(event).__name__,
                "fields": encode_dataclass(event),
            }
        )

    def decision(
        self, decision: Decision, *, rid: str | None = None, policy_version: int | None = None
    ) -> None:
        name = type(decision).__name__
        sample_id = getattr(decision, "sample_id", None)
        high = getattr(decision, "high", None)
        if sample_id is not None and isinstance(high, bool):
            self._high[sample_id] = high
        elif sample_id is not None:
            high = self._high.get(sample_id)
        self.decisions += 1
        self._emit(
            {
                "t": self._t,
                "kind": decision_kind(name),
                "type": name,
                "fields": encode_dataclass(decision),
                "sample_id": sample_id,
                "rid": rid,
                "engine": getattr(decision, "engine", None),
                "class": self._classes.get(sample_id) if sample_id is not None else None,
                "high": high,
                "policy_version": policy_version,
                "reason": getattr(decision, "reason", None),
            }
        )

    def note(self, kind: str, now_s: float, **fields: Any) -> None:
        """Record one of the conductor's own decisions (a kind of `CONDUCTOR_KINDS`)."""
        if kind not in CONDUCTOR_KINDS:
            raise DecisionLogError(
                f"unknown conductor decision {kind!r}; known: {sorted(CONDUCTOR_KINDS)}"
            )
        self.notes += 1
        self._emit({"t": now_s, "kind": kind, "by": "conductor", "fields": _encode(fields)})

    def _emit(self, record: dict[str, Any]) -> None:
        self._write({"seq": self._seq, **record})
        self._seq += 1


# -- replay -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What a replay found: counts, and the first difference (None when identical)."""

    events: int
    decisions: int
    line: int | None = None  # 1-based line of the first differing record
    expected: str | None = None
    got: str | None = None
    notes: int = 0  # the conductor's own decisions (skipped: no scheduler made them)

    @property
    def identical(self) -> bool:
        return self.line is None


def _show(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return "(no decision)"
    return f"{record.get('type')} {record.get('fields')}"


def replay_decisions(records: Iterable[tuple[int, Mapping[str, Any]]]) -> ReplayResult:
    """Feed the recorded events (`(line, record)` pairs, header first) through a fresh
    scheduler and compare its decisions with the recorded ones, in order."""
    iterator = iter(records)
    first = next(iterator, None)
    if first is None or first[1].get("kind") != "header":
        raise DecisionLogError("the decision log does not start with its header record")
    line, header = first
    if header.get("format") != FORMAT:
        raise DecisionLogError(f"line {line}: format {header.get('format')!r}, expected {FORMAT}")
    try:
        config = SchedulerConfig.model_validate(header.get("scheduler_config", {}))
    except ValueError as exc:
        raise DecisionLogError(f"line {line}: bad scheduler_config: {exc}") from exc
    scheduler = RolloutScheduler(config)
    pending: list[Mapping[str, Any]] = []  # decisions the last event produced, not yet matched
    event_line = line
    events = decisions = notes = 0
    for line, record in iterator:
        if record.get("by") == "conductor":
            if record.get("kind") not in CONDUCTOR_KINDS:
                raise DecisionLogError(
                    f"line {line}: unknown conductor decision {record.get('kind')!r}"
                )
            notes += 1
            continue
        try:
            if record.get("kind") == "event":
                if pending:
                    return ReplayResult(
                        events, decisions, line, "(no decision)", _show(pending[0]), notes
                    )
                event = decode_record(record)
                events += 1
                event_line = line
                pending = [
                    {"type": type(d).__name__, "fields": encode_dataclass(d)}
                    for d in scheduler.handle(event)
                ]
                continue
            decode_record(record)  # a known, well-formed decision
        except DecisionLogError as exc:
            raise DecisionLogError(f"line {line}: {exc}") from exc
        decisions += 1
        got = pending.pop(0) if pending else None
        expected = {"type": record.get("type"), "fields": record.get("fields")}
        if got != expected:
            return ReplayResult(events, decisions, line, _show(expected), _show(got), notes)
    if pending:
        return ReplayResult(
            events,
            decisions,
            event_line,
            "(no more decisions after this event)",
            _show(pending[0]),
            notes,
        )
    return ReplayResult(events, decisions, notes=notes)
