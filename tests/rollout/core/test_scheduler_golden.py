"""Golden test: the scheduler's decisions on a seeded, realistic event stream never change.

The stream is `rollout.jobs.scheduler_bench.SyntheticRollout` at a small scale (a few hundred
samples, several engines, weight-update interruptions, preemptions, priority changes, KV
residency in one case). Every core call's decisions are written as one line; the stored file
(`data/scheduler_golden.json`) holds each case's line count, the SHA-256 of all lines and the
first lines to read. An optimisation of the scheduler must leave every line byte-identical.
Regenerate (only for an intended change of behaviour) with
``.venv/bin/python tests/rollout/core/test_scheduler_golden.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rollout.core.config import SchedulerConfig
from rollout.core.scheduler_events import Decision
from rollout.jobs.scheduler_bench import (
    BenchScale,
    SchedulerBenchConfig,
    SchedulerBenchWorkload,
    SyntheticRollout,
    decision_line,
)

GOLDEN = Path(__file__).parent / "data" / "scheduler_golden.json"
EXCERPT_LINES = 60
EVENTS = 6_000

CASES: dict[str, tuple[BenchScale, SchedulerConfig, SchedulerBenchWorkload]] = {
    "four_engines": (
        BenchScale(groups=32, group_size=8, engines=4, slots_per_engine=16),
        SchedulerConfig(low_priority_kv_watermark=0.1, preemption=True, preemption_payoff=False),
        SchedulerBenchWorkload(kv_capacity_tokens=120_000, mean_turns=4.0),
    ),
    "four_engines_kv_residency": (
        BenchScale(groups=32, group_size=8, engines=4, slots_per_engine=24),
        SchedulerConfig(
            kv_residency=True,
            kv_residency_shared_prefix=False,
            kv_residency_adaptive_room=False,
            hold_critical_kv=True,
            prior_peak_context_tokens=4096,
            preemption_payoff=False,
        ),
        SchedulerBenchWorkload(kv_capacity_tokens=40_000, host_kv_capacity_tokens=200_000),
    ),
    "one_engine": (
        BenchScale(groups=24, group_size=8, engines=1, slots_per_engine=48),
        SchedulerConfig(preemption_payoff=False),
        SchedulerBenchWorkload(kv_capacity_tokens=150_000, mean_turns=4.0),
    ),
}


def record(case: str) -> list[str]:
    """Every core call of the case's stream, one line each (kind and decisions)."""
    scale, scheduler, workload = CASES[case]
    config = SchedulerBenchConfig(scales=(scale,), seed=7, workload=workload, scheduler=scheduler)
    lines: list[str] = []

    def observe(kind: str, _wall_ns: int, _cpu_ns: int, decisions: tuple[Decision, ...]) -> None:
        lines.append(decision_line(kind, decisions))

    rollout = SyntheticRollout(config, scale, observe)
    rollout.start()
    rollout.run(EVENTS)
    return lines


def summarize(lines: list[str]) -> dict[str, Any]:
    text = "\n".join(lines).encode()
    return {
        "calls": len(lines),
        "decisions": sum(line.count(" | ") for line in lines),
        "preemptions": sum(line.count("| preempt ") for line in lines),
        "sha256": hashlib.sha256(text).hexdigest(),
        "excerpt": lines[:EXCERPT_LINES],
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_scheduler_decisions_match_the_recorded_golden_stream(case: str) -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))[case]
    got = summarize(record(case))
    assert got["excerpt"] == golden["excerpt"]
    assert (got["calls"], got["decisions"], got["preemptions"]) == (
        golden["calls"],
        golden["decisions"],
        golden["preemptions"],
    )
    assert got["sha256"] == golden["sha256"]


def test_the_data_parallel_rule_leaves_the_single_engine_stream_unchanged() -> None:
    """`critical_spread` is a no-op with one engine: the stored stream, byte for byte."""
    scale, scheduler, workload = CASES["one_engine"]
    CASES["spread_one_engine"] = (
        scale,
        scheduler.model_copy(update={"critical_spread": True}),
        workload,
    )
    try:
        got = summarize(record("spread_one_engine"))
    finally:
        del CASES["spread_one_engine"]
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))["one_engine"]
    assert got == golden


def test_golden_stream_exercises_preemption_and_priority_changes() -> None:
    """The stored stream is worth guarding: it preempts, interrupts and re-prioritizes."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    for case in ("four_engines", "four_engines_kv_residency"):
        assert golden[case]["preemptions"] > 0, case
    lines = record("four_engines")
    assert any("| priority " in line for line in lines)
    assert any(line.startswith("generation aborted") for line in lines)
    assert any(line.startswith("engine paused") for line in lines)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.write_text(
        json.dumps({case: summarize(record(case)) for case in sorted(CASES)}, indent=1) + "\n",
        encoding="utf-8",
    )
    print(f"wrote {GOLDEN}")


@pytest.mark.parametrize("case", ["four_engines", "four_engines_kv_residency"])
def test_the_schedulers_incremental_counts_match_a_recount_after_every_call(case: str) -> None:
    """The counters that spare dispatch a scan (open engines, preemption candidates, engines
    with a preemption in flight) agree with counting from scratch, all along the stream."""
    scale, scheduler_config, workload = CASES[case]
    config = SchedulerBenchConfig(
        scales=(scale,), seed=7, workload=workload, scheduler=scheduler_config
    )
    checked = [0]

    def observe(_kind: str, _wall: int, _cpu: int, _made: tuple[Decision, ...]) -> None:
        core = rollout.scheduler
        engines = core._engines.values()
        unpaused = [engine for engine in engines if not engine.paused]
        assert core._victims_total == sum(len(engine.victims) for engine in unpaused)
        assert core._draining_engines == {engine.name for engine in engines if engine.draining}
        assert core._open == {engine.name for engine in unpaused if engine.free_slots}
        checked[0] += 1

    rollout = SyntheticRollout(config, scale, observe)
    rollout.start()
    rollout.run(2_000)
    assert checked[0] > 2_000
