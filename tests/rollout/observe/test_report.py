"""Spec of the run report: every file is written, PNGs are real images, gaps are tolerated."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from foundation.config import load_config
from rollout.cli.report import report
from rollout.observe.metrics import compute_run_metrics
from rollout.observe.plots import PlotConfig, trailing_mean
from rollout.observe.report import compare_table, generate_report, write_report
from rollout.observe.run_dir import RunDir
from rollout.observe.run_records import MissingRunFileError, StepRecord
from tests.paths import REPO_ROOT
from tests.rollout.run_dir_factory import write_synthetic_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MIN_PNG_BYTES = 5_000  # an empty 1100x495 canvas compresses to ~3 kB; a real plot is larger
EXPECTED_PLOTS = {"t_next.png", "busy.png", "kv.png", "phases.png", "staleness.png", "timeline.png"}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    """A synthetic run with every input file, reported once for all tests here."""
    run_dir = write_synthetic_run(tmp_path_factory.mktemp("run") / "run-full")
    write_report(run_dir.root)
    return run_dir


def _steps_only(root: Path) -> RunDir:
    run_dir = RunDir(root).create()
    with run_dir.open_log("steps") as log:
        log.append(StepRecord(1, 4.0, ("g0",)).to_dict())
        log.append(StepRecord(2, 9.0, ("g1",)).to_dict())
    return run_dir


# -- the full report --------------------------------------------------------------------------


def test_report_writes_metrics_report_and_every_plot(full_run: RunDir) -> None:
    assert full_run.metrics_path.is_file()
    assert full_run.report_path.is_file()
    assert {path.name for path in full_run.plots_dir.iterdir()} == EXPECTED_PLOTS


@pytest.mark.parametrize("name", sorted(EXPECTED_PLOTS))
def test_every_plot_is_a_non_trivial_png(full_run: RunDir, name: str) -> None:
    data = (full_run.plots_dir / name).read_bytes()

    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > MIN_PNG_BYTES


def test_report_links_every_plot_by_a_relative_path_that_exists(full_run: RunDir) -> None:
    text = full_run.report_path.read_text(encoding="utf-8")

    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)

    assert {Path(link).name for link in links} == EXPECTED_PLOTS
    assert all((full_run.root / link).is_file() for link in links)


def test_report_has_summary_steps_and_explanations(full_run: RunDir) -> None:
    text = full_run.report_path.read_text(encoding="utf-8")

    assert text.startswith("# Run report: run-full")
    for heading in ("## Summary", "## Training steps", "## Phase breakdown", "## What the metrics"):
        assert heading in text
    assert "| mean T_next |" in text


def test_metrics_json_is_strict_json_with_the_summary(full_run: RunDir) -> None:
    def refuse(constant: str) -> None:
        raise ValueError(f"metrics.json holds {constant}")

    record = json.loads(full_run.metrics_path.read_text(), parse_constant=refuse)

    assert record["summary"]["steps"] == 3
    assert record["inputs"] == ["steps", "events", "timeseries", "trajectories"]
    assert record["summary"]["preemptions"] == 1


def test_generate_report_returns_the_metrics_it_wrote(tmp_path: Path) -> None:
    run_dir = write_synthetic_run(tmp_path / "run")

    written = generate_report(run_dir, PlotConfig(timeline_samples=3))

    assert json.loads(written.metrics_path.read_text())["summary"]["mean_t_next_s"] == (
        pytest.approx(written.metrics.mean_t_next_s)
    )


# -- missing files ----------------------------------------------------------------------------


def test_a_run_with_only_steps_still_gets_a_report_with_t_next(tmp_path: Path) -> None:
    run_dir = _steps_only(tmp_path / "steps-only")

    report_path = write_report(run_dir.root)

    text = report_path.read_text(encoding="utf-8")
    assert "timeseries.jsonl` missing" in text
    assert {path.name for path in run_dir.plots_dir.iterdir()} == {"t_next.png"}
    assert json.loads(run_dir.metrics_path.read_text())["summary"]["mean_t_next_s"] == 4.5


def test_a_run_without_steps_fails_with_a_message_naming_steps_jsonl(tmp_path: Path) -> None:
    run_dir = RunDir(tmp_path / "no-steps").create()
    run_dir.events_path.write_text("")

    with pytest.raises(MissingRunFileError, match=r"steps\.jsonl is missing"):
        write_report(run_dir.root)


def test_a_path_that_is_not_a_directory_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(MissingRunFileError, match="not a directory"):
        write_report(tmp_path / "nowhere")


# -- comparison -------------------------------------------------------------------------------


def test_compare_table_shows_ratios_to_the_reference_run() -> None:
    slow = compute_run_metrics([StepRecord(1, 10.0, ("a",)), StepRecord(2, 20.0, ("b",))])
    fast = compute_run_metrics([StepRecord(1, 5.0, ("a",)), StepRecord(2, 10.0, ("b",))])

    table = compare_table({"sync": slow, "conductor": fast})

    row = next(line for line in table.splitlines() if line.startswith("| mean T_next |"))
    assert row == "| mean T_next | 10.00 s | 5.00 s (×0.50) |"
    assert table.splitlines()[0] == "| metric | sync (reference) | conductor |"


def test_compare_table_rejects_an_unknown_reference() -> None:
    metrics = compute_run_metrics([StepRecord(1, 1.0, ("a",))])

    with pytest.raises(KeyError, match="baseline"):
        compare_table({"sync": metrics}, reference="baseline")


# -- plot helpers -----------------------------------------------------------------------------


def test_trailing_mean_averages_over_the_window_ending_at_each_sample() -> None:
    times = [0.0, 1.0, 2.0, 3.0]
    values = [0.0, 1.0, 1.0, 0.0]

    assert trailing_mean(times, values, window_s=2.0) == [0.0, 0.5, 1.0, 0.5]


# -- command line -----------------------------------------------------------------------------


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("report")(report)
    app.command("noop")(lambda: None)  # two commands, so `report` is a sub-command
    return app


def test_report_command_prints_the_summary_table(tmp_path: Path) -> None:
    run_dir = _steps_only(tmp_path / "cli-run")

    result = CliRunner().invoke(_cli(), ["report", str(run_dir.root), "--set", "dpi=40"])

    assert result.exit_code == 0, result.output
    assert "mean T_next" in result.output
    assert run_dir.report_path.is_file()


def test_report_command_exits_with_an_error_without_steps(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()

    result = CliRunner().invoke(_cli(), ["report", str(tmp_path / "empty")])

    assert result.exit_code == 1
    assert "steps.jsonl" in "".join(result.output.split())  # the path may wrap anywhere


def test_shipped_report_config_matches_the_defaults() -> None:
    shipped = REPO_ROOT / "configs/report/default.yaml"

    assert load_config(PlotConfig, shipped) == PlotConfig()


def test_a_whole_run_reports_no_integrity_warning(full_run: RunDir) -> None:
    integrity = json.loads(full_run.metrics_path.read_text())["integrity"]
    assert integrity["warnings"] == [] and integrity["missing_groups"] == 0
    assert "Warnings" not in full_run.report_path.read_text()


def test_a_truncated_trajectory_file_is_counted_and_warned_about(tmp_path: Path) -> None:
    """Fault 8: `trajectories.jsonl` cut at half must not give a silent, wrong report."""
    run_dir = write_synthetic_run(tmp_path / "run-cut")
    data = run_dir.trajectories_path.read_bytes()
    run_dir.trajectories_path.write_bytes(data[: len(data) // 2 + 7])  # mid-line
    app = typer.Typer()
    app.command()(report)
    result = CliRunner().invoke(app, [str(run_dir.root)])
    assert result.exit_code == 0, result.output
    integrity = json.loads(run_dir.metrics_path.read_text())["integrity"]
    assert integrity["torn_files"] == ["trajectories.jsonl"]
    assert integrity["missing_groups"] >= 1
    assert "warning:" in result.output and "have no trajectories" in result.output
    assert "## Warnings: incomplete data" in run_dir.report_path.read_text()
