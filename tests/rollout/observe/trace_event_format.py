"""A validator of the Chrome Trace Event Format (the JSON object form Perfetto's UI and
chrome://tracing load), from its specification ("Trace Event Format", Google; the phases,
fields and nesting rules below): a JSON Schema checked with `jsonschema`, and the rules a
schema cannot say (slices on one thread nest, async begins and ends pair up, every process and
thread used is named)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import jsonschema

_NUMBER = {"type": "number"}
_ID = {"type": ["string", "integer"]}
_PHASE_RULES: list[dict[str, Any]] = [
    {  # complete event: a slice with its duration
        "if": {"properties": {"ph": {"const": "X"}}},
        "then": {"required": ["ts", "dur"], "properties": {"dur": {"minimum": 0}}},
    },
    {  # instant event: its scope (global, process, thread)
        "if": {"properties": {"ph": {"enum": ["i", "I"]}}},
        "then": {"required": ["ts"], "properties": {"s": {"enum": ["g", "p", "t"]}}},
    },
    {  # nestable async events: category and id pair a begin with its end
        "if": {"properties": {"ph": {"enum": ["b", "e", "n"]}}},
        "then": {"required": ["ts", "cat", "id"]},
    },
    {  # counter event: numeric series
        "if": {"properties": {"ph": {"const": "C"}}},
        "then": {
            "required": ["ts", "args"],
            "properties": {"args": {"type": "object", "additionalProperties": _NUMBER}},
        },
    },
    {  # metadata event
        "if": {"properties": {"ph": {"const": "M"}}},
        "then": {
            "required": ["args"],
            "properties": {
                "name": {
                    "enum": [
                        "process_name",
                        "process_labels",
                        "process_sort_index",
                        "thread_name",
                        "thread_sort_index",
                    ]
                }
            },
        },
    },
]
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "ph", "pid", "tid"],
                "properties": {
                    "name": {"type": "string"},
                    "cat": {"type": "string"},
                    "ph": {
                        "enum": [*list("BEXiICbneNODstfPMRcz"), "(", ")"],
                    },
                    "ts": _NUMBER,
                    "dur": _NUMBER,
                    "pid": {"type": "integer"},
                    "tid": {"type": ["integer", "string"]},
                    "id": _ID,
                    "args": {"type": "object"},
                },
                "allOf": _PHASE_RULES,
            },
        },
    },
}


def validate_trace(trace: dict[str, Any]) -> None:
    """Raise `jsonschema.ValidationError` or `AssertionError` naming the first broken rule."""
    jsonschema.validate(trace, SCHEMA)
    events = trace["traceEvents"]
    named_processes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    named_threads = {
        (e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"
    }
    slices: dict[tuple[int, Any], list[tuple[float, float]]] = defaultdict(list)
    open_async: dict[tuple[int, str, Any], list[float]] = defaultdict(list)
    for event in events:
        if event["ph"] == "M":
            continue
        assert event["pid"] in named_processes, f"process {event['pid']} has no process_name"
        if event["ph"] == "X":
            key = (event["pid"], event["tid"])
            assert key in named_threads, f"thread {key} has no thread_name"
            slices[key].append((event["ts"], event["ts"] + event["dur"]))
        elif event["ph"] == "b":
            open_async[(event["pid"], event["cat"], event["id"])].append(event["ts"])
        elif event["ph"] == "e":
            begun = open_async[(event["pid"], event["cat"], event["id"])]
            assert begun, f"async end without a begin: {event}"
            assert begun.pop() <= event["ts"], f"async end before its begin: {event}"
    assert not any(open_async.values()), "an async begin was never ended"
    for key, spans in slices.items():
        stack: list[float] = []  # ends of the enclosing slices
        for start, end in sorted(spans, key=lambda span: (span[0], -span[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], f"slices on thread {key} overlap unnested"
            stack.append(end)
