"""A run as a Chrome / Perfetto trace (`conductor trace export RUN_DIR`): open the JSON in
ui.perfetto.dev or chrome://tracing and see every sample, engine and env host on one timeline.

The Trace Event Format (JSON object form: `{"traceEvents": [...], "displayTimeUnit": "ms"}`),
times in microseconds since the run started:

* process **samples**: one thread (track) per sample, named by its sample id, with complete
  events (`ph: X`) `pre_gen`, `generate`, `pre_act`, `tool` and `grading`, plus instants
  (`ph: i`) for preemptions, interruptions, KV offloads and prefetches, truncations and
  infrastructure errors. A sample's phases follow each other, so its slices never overlap;
  `env_init` (which overlaps the first generation) goes to the env host.
* one process per **engine**: its generations as async slices (`ph: b/e`; concurrent requests
  overlap) and counters (`ph: C`) from the engine samples: requests running and queued, KV
  occupancy, busy fraction.
* one process per **env host** (the pool's `host`, else "env pool"): env acquires (`env_init`)
  and tool runs as async slices.

Pure: step events and engine samples in, the trace object out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.events import Phase, StepEvent
from rollout.observe.run_dir import RunDir
from rollout.observe.run_records import MissingRunFileError, TimeseriesSample

__all__ = ["SAMPLE_SLICES", "chrome_trace", "export_run_trace"]

SAMPLE_SLICES: Mapping[Phase, str] = {
    Phase.PRE_GEN: "pre_gen",
    Phase.GEN: "generate",
    Phase.PRE_ACT: "pre_act",
    Phase.ACT: "tool",
    Phase.REWARD: "grading",
}
"""The phases drawn on a sample's track, and their slice names."""

_INSTANTS = (
    Phase.PREEMPT,
    Phase.INTERRUPT,
    Phase.OFFLOAD,
    Phase.PREFETCH,
    Phase.TRUNCATE,
    Phase.INFRA_ERROR,
)
_SAMPLES_PID = 1
_US = 1_000_000.0
_DEFAULT_HOST = "env pool"


def chrome_trace(
    events: Iterable[StepEvent], timeseries: Iterable[TimeseriesSample] = ()
) -> dict[str, Any]:
    """The trace object of a run's step events (times in seconds since the run start) and
    its engine samples."""
    ordered = sorted(events, key=lambda e: (e.start_s, e.end_s))
    trace: list[dict[str, Any]] = [_name("process_name", _SAMPLES_PID, 0, "samples")]
    trace.append(_sort("process_sort_index", _SAMPLES_PID, 0))
    threads: dict[str, int] = {}
    processes: dict[str, int] = {}
    async_ids = 0

    def process(kind: str, name: str) -> int:
        key = f"{kind} {name}"
        if key not in processes:
            pid = processes[key] = _SAMPLES_PID + 1 + len(processes)
            trace.append(_name("process_name", pid, 0, key))
            trace.append(_sort("process_sort_index", pid, pid))
        return processes[key]

    for event in ordered:
        if event.sample_id and event.phase in (*SAMPLE_SLICES, *_INSTANTS):
            tid = threads.get(event.sample_id)
            if tid is None:
                tid = threads[event.sample_id] = len(threads) + 1
                label = f"{event.sample_id}" + (f" ({event.group_id})" if event.group_id else "")
                trace.append(_name("thread_name", _SAMPLES_PID, tid, label))
                trace.append(_sort("thread_sort_index", _SAMPLES_PID, tid, tid))
            if event.phase in SAMPLE_SLICES:
                trace.append(_complete(SAMPLE_SLICES[event.phase], event, _SAMPLES_PID, tid))
            else:
                trace.append(_instant(event, _SAMPLES_PID, tid))
        if event.phase is Phase.GEN and event.data.get("engine"):
            async_ids += 1
            pid = process("engine", str(event.data["engine"]))
            trace += _async("generate", event, pid, async_ids)
        elif event.phase in (Phase.ACT, Phase.ENV_INIT):
            async_ids += 1
            pid = process("env host", str(event.data.get("host") or _DEFAULT_HOST))
            name = "tool" if event.phase is Phase.ACT else "env_init"
            trace += _async(name, event, pid, async_ids)
    for sample in sorted(timeseries, key=lambda s: (s.engine, s.t_s)):
        trace += _counters(sample, process("engine", sample.engine))
    return {"traceEvents": trace, "displayTimeUnit": "ms"}


def export_run_trace(run_dir: Path, out: Path | None = None) -> Path:
    """Write `chrome_trace` of the run in `run_dir` (events.jsonl, timeseries.jsonl) to `out`
    (default `RUN_DIR/trace.json`); returns the path.

    Raises:
        MissingRunFileError: the run recorded no step events.
    """
    directory = RunDir(run_dir)
    events = directory.read_events()
    if not events:
        raise MissingRunFileError(
            f"{directory.events_path} holds no step events: nothing to draw (is {run_dir} a "
            "run directory of `conductor run` or `conductor simulate`?)"
        )
    timeseries = directory.read_timeseries() if directory.timeseries_path.exists() else []
    target = out or run_dir / "trace.json"
    target.write_text(json.dumps(chrome_trace(events, timeseries)), encoding="utf-8")
    return target


def _us(seconds: float) -> float:
    return round(seconds * _US, 3)


def _args(event: StepEvent) -> dict[str, Any]:
    args: dict[str, Any] = {"sample": event.sample_id, "group": event.group_id}
    args.update({key: value for key, value in event.data.items() if _plain(value)})
    return args


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _complete(name: str, event: StepEvent, pid: int, tid: int) -> dict[str, Any]:
    return {
        "name": name,
        "cat": event.phase.value,
        "ph": "X",
        "ts": _us(event.start_s),
        "dur": max(0.0, _us(event.end_s) - _us(event.start_s)),
        "pid": pid,
        "tid": tid,
        "args": _args(event),
    }


def _instant(event: StepEvent, pid: int, tid: int) -> dict[str, Any]:
    return {
        "name": event.phase.value,
        "cat": event.phase.value,
        "ph": "i",
        "s": "t",
        "ts": _us(event.start_s),
        "pid": pid,
        "tid": tid,
        "args": _args(event),
    }


def _async(name: str, event: StepEvent, pid: int, ident: int) -> list[dict[str, Any]]:
    common = {"name": name, "cat": event.phase.value, "pid": pid, "tid": 0, "id": ident}
    return [
        {**common, "ph": "b", "ts": _us(event.start_s), "args": _args(event)},
        {**common, "ph": "e", "ts": max(_us(event.end_s), _us(event.start_s))},
    ]


def _counters(sample: TimeseriesSample, pid: int) -> list[dict[str, Any]]:
    ts = _us(sample.t_s)
    series: list[tuple[str, dict[str, float]]] = [
        ("requests", {"running": sample.running, "queued": sample.waiting}),
    ]
    if sample.kv_occupancy is not None:
        series.append(("kv occupancy", {"device": sample.kv_occupancy}))
    if sample.busy is not None:
        series.append(("busy", {"fraction": sample.busy}))
    return [
        {"name": name, "ph": "C", "ts": ts, "pid": pid, "tid": 0, "args": values}
        for name, values in series
    ]


def _name(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}


def _sort(kind: str, pid: int, tid: int, index: int | None = None) -> dict[str, Any]:
    order = pid if index is None else index
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": order}}
