"""Spec of `conductor bench scheduler` (rollout/jobs/scheduler_bench.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foundation.config import load_config
from rollout.cli.bench import app
from rollout.core.scheduler_events import Decision
from rollout.jobs.scheduler_bench import (
    BenchScale,
    SchedulerBenchConfig,
    SyntheticRollout,
    decision_line,
    latency_rows,
    markdown_table,
    run_scheduler_bench,
    to_json,
)

CONFIG = Path(__file__).parents[3] / "configs/bench/scheduler.yaml"
TINY = SchedulerBenchConfig(
    scales=(BenchScale(groups=8, group_size=4, engines=2, slots_per_engine=4, async_factor=2),),
    warmup_events=200,
    measured_events=600,
)


def test_every_event_kind_gets_a_row_and_the_overall_row_comes_last() -> None:
    (result,) = run_scheduler_bench(TINY)
    kinds = [row.kind for row in result.kinds]
    assert kinds[-1] == "all"
    assert {"generation finished", "act finished", "turn boundary (priority)"} <= set(kinds)
    assert result.overall.calls == sum(row.calls for row in result.kinds[:-1])
    for row in result.kinds:
        assert 0 < row.p50_us <= row.p99_us <= row.max_us, row
        assert 0 <= row.cpu_p50_us <= row.cpu_p99_us, row


def test_progress_is_reported_up_to_every_event() -> None:
    seen: list[tuple[int, int]] = []
    run_scheduler_bench(TINY, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (800, 800)


def test_the_stream_is_the_same_for_the_same_seed() -> None:
    def lines(seed: int) -> list[str]:
        config = TINY.model_copy(update={"seed": seed})
        out: list[str] = []

        def observe(kind: str, _wall: int, _cpu: int, made: tuple[Decision, ...]) -> None:
            out.append(decision_line(kind, made))

        rollout = SyntheticRollout(config, config.scales[0], observe)
        rollout.start()
        rollout.run(500)
        return out

    assert lines(1) == lines(1)
    assert lines(1) != lines(2)


def test_a_scale_must_split_into_whole_batches() -> None:
    with pytest.raises(ValueError, match="multiple of async_factor"):
        BenchScale(groups=10, engines=2, slots_per_engine=4, async_factor=4)


def test_the_shipped_config_measures_1k_and_10k_live_samples_on_64_engines() -> None:
    config = load_config(SchedulerBenchConfig, CONFIG)
    assert [(s.live_samples, s.groups, s.engines) for s in config.scales] == [
        (1_000, 100, 64),
        (10_000, 1_000, 64),
    ]


def test_the_reports_carry_every_row() -> None:
    results = run_scheduler_bench(TINY)
    rows = latency_rows(results)
    record = json.loads(to_json(TINY, results))
    assert len(record["scales"][0]["kinds"]) == len(rows)
    assert markdown_table("t", results).count("\n| ") == len(rows) + 1  # rows + header


def test_the_command_prints_the_table_and_writes_json_and_markdown(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "scales: [{groups: 8, group_size: 4, engines: 2, slots_per_engine: 4, async_factor: 2}]\n"
        "warmup_events: 100\nmeasured_events: 300\n",
        encoding="utf-8",
    )
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    result = CliRunner().invoke(
        app, ["scheduler", str(config), "--json", str(out_json), "--markdown", str(out_md)]
    )
    assert result.exit_code == 0, result.output
    assert "CPU p99" in result.output  # the table (cells may wrap in a narrow terminal)
    assert "(tiny.yaml;" in result.output
    assert json.loads(out_json.read_text())["scales"][0]["live_samples"] == 32
    assert "| 32 samples | all |" in out_md.read_text()


def test_a_bad_override_fails_with_the_key_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["scheduler", str(CONFIG), "measured_events=0"])
    assert result.exit_code != 0
    assert "measured_events" in result.output
