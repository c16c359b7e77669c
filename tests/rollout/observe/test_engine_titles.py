"""Titles name the run's real engine, and an engine busy fraction nobody measured reads n/a
(with the reason) instead of 0 %."""

from __future__ import annotations

import json
from pathlib import Path

from rollout.engines.base import EngineStats
from rollout.observe.report import write_report
from rollout.observe.run_records import TimeseriesSample
from rollout.observe.timeseries import EngineCounters, TimeseriesSampler
from rollout.observe.titles import BUSY_UNKNOWN, busy_text, engine_title
from tests.rollout.run_dir_factory import write_synthetic_run


class StatsOnly:
    """An engine that only answers `stats()` (all the sampler reads)."""

    name = "e0"

    def __init__(self, extra: dict[str, float]) -> None:
        self.extra = extra

    def stats(self) -> EngineStats:
        return EngineStats(1, 0, 4, 10, 100, extra=dict(self.extra))


def test_titles_name_the_backend_the_run_used() -> None:
    assert engine_title("sglang") == "SGLang servers"
    assert engine_title("sim") == "simulated engine (wall clock)"
    assert engine_title("vllm") == "vllm engine"


def test_an_engine_without_busy_time_is_sampled_as_unknown_not_idle() -> None:
    engines = {"e0": StatsOnly({}), "e1": StatsOnly({"busy_s": 0.0})}
    counters = {"e0": EngineCounters(), "e1": EngineCounters()}
    sampler = TimeseriesSampler(engines, counters, start_s=0.0)  # type: ignore[arg-type]
    engines["e1"].extra["busy_s"] = 0.5
    unknown, known = sampler.sample(1.0)
    assert unknown["busy"] is None and known["busy"] == 0.5
    assert TimeseriesSample.from_dict(json.loads(json.dumps(unknown))).busy is None


def test_the_report_says_na_and_why_when_no_engine_measured_busy_time(tmp_path: Path) -> None:
    run_dir = write_synthetic_run(tmp_path / "run")
    lines = run_dir.timeseries_path.read_text(encoding="utf-8").splitlines()
    records = [{**json.loads(line), "busy": None} for line in lines]
    run_dir.timeseries_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    run_dir.config_path.write_text("engine_backend: sglang\n", encoding="utf-8")
    text = write_report(run_dir.root).read_text(encoding="utf-8")
    assert text.startswith("# Run report: run (SGLang servers)")
    assert f"Engine busy fraction n/a: {BUSY_UNKNOWN}." in text
    assert busy_text(None).startswith("engine busy n/a (") and busy_text(0.25) == "engine busy 25%"
