"""`conductor run` and `conductor simulate` end to end, with tiny settings."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import typer
from typer.testing import CliRunner

from rollout.cli.run import DEFAULT_RUN_CONFIG, run
from rollout.cli.simulate import simulate
from rollout.trajectories.writers import read_jsonl_groups
from tests.paths import CONFIGS

SPANS_TASK = "swe-taskset__spans-remove-drops-right-part"
TINY_RUN = [
    "groups_per_step=1",
    "group_size=4",
    "async_factor=1",
    "pool.overrides=[backend=local, warm_per_image=1, max_live=6, act_slots=4]",
    "model.overrides=[cost.t_weights_s=0.0005]",  # a 10x faster engine keeps these runs short
    "trainer.train_time_s=0.1",
    "seed=3",
]
"""One group of 4 on the local backend: the settings every `conductor run` test here shares."""


def cli(command: Callable[..., None]) -> typer.Typer:
    app = typer.Typer()
    app.command()(command)
    return app


def test_conductor_run_leaves_a_run_directory_with_rewards_of_both_signs(tmp_path: Path) -> None:
    overrides = [*TINY_RUN, "steps=1", f"task_ids=[{SPANS_TASK}]", "scripted.fix_probability=0.5"]
    result = CliRunner().invoke(
        cli(run), [str(DEFAULT_RUN_CONFIG), *overrides, "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    [run_dir] = list(tmp_path.iterdir())
    for name in ("config.yaml", "events.jsonl", "steps.jsonl", "timeseries.jsonl"):
        assert (run_dir / name).stat().st_size > 0, name
    [group] = list(read_jsonl_groups(run_dir / "trajectories.jsonl"))
    assert len(group) == 4 and all(t.infra_error is None for t in group)
    assert {t.reward for t in group} == {0.0, 1.0}
    assert (run_dir / "metrics.json").exists()
    assert "T_next" in result.output and "local" in result.output


def test_conductor_simulate_prints_a_simulated_comparison(tmp_path: Path) -> None:
    config = CONFIGS / "simulate" / "short_context.yaml"
    overrides = ["steps=1", "groups_per_step=1", "group_size=2", "trainer.train_time_s=1"]
    result = CliRunner().invoke(
        cli(simulate), [str(config), *overrides, "--out", str(tmp_path), "--no-report"]
    )
    assert result.exit_code == 0, result.output
    assert "SIMULATED" in result.output and "T_next step 1" in result.output
    assert "qwen3-8b-like" in result.output
    [root] = list(tmp_path.iterdir())
    assert sorted(path.name for path in root.iterdir()) == ["conductor", "sync", "traj_async"]
    steps = [json.loads(line) for line in (root / "sync" / "steps.jsonl").read_text().splitlines()]
    assert [step["step"] for step in steps] == [1]


def test_conductor_run_on_a_users_own_task_file(tmp_path: Path) -> None:
    """Way 1 end to end: a SWE-bench record plus a git bundle, from `tasks_file`."""
    from tests.envs.swe.own_repo import make_own_repo

    own = make_own_repo(tmp_path / "own")
    tasks_file = own.write_tasks(tmp_path / "tasks.jsonl", repo_path="own/mylib.bundle")
    overrides = [*TINY_RUN, f"tasks_file={tasks_file}", "steps=1", "scripted.fix_probability=0.5"]
    out = tmp_path / "runs"
    result = CliRunner().invoke(cli(run), [str(DEFAULT_RUN_CONFIG), *overrides, "--out", str(out)])
    assert result.exit_code == 0, result.output
    [run_dir] = list(out.iterdir())
    [group] = list(read_jsonl_groups(run_dir / "trajectories.jsonl"))
    assert len(group) == 4
    assert all(t.infra_error is None for t in group) and {t.reward for t in group} == {0.0, 1.0}


def test_conductor_run_reports_bad_records_of_a_task_file_in_one_message(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text('{"instance_id": "x__y-1"}\n')
    result = CliRunner().invoke(
        cli(run), [str(DEFAULT_RUN_CONFIG), f"tasks_file={tasks_file}", "--out", str(tmp_path)]
    )
    assert result.exit_code != 0 and "bad task record" in result.output, result.output
    assert "Traceback" not in result.output


def test_a_run_survives_engine_resets_and_hangs_with_every_sample_consumed_once(
    tmp_path: Path,
) -> None:
    """Faults 4 and 5: a leaked ConnectionResetError crashed the run; a hang stalled it."""
    overrides = [
        *TINY_RUN,
        "steps=2",
        f"task_ids=[{SPANS_TASK}]",
        "engine_faults.reset_probability=0.05",
        "engine_faults.hang_probability=0.03",
        "engine_faults.seed=7",
        "agent_loop.generate_timeout_s=2",
        "agent_loop.max_attempts=6",
    ]
    result = CliRunner().invoke(
        cli(run), [str(DEFAULT_RUN_CONFIG), *overrides, "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    [run_dir] = list(tmp_path.iterdir())
    groups = list(read_jsonl_groups(run_dir / "trajectories.jsonl"))
    samples = [t.sample_id for group in groups for t in group]
    assert len(groups) == 2 and len(samples) == len(set(samples)) == 8
    assert all(t.infra_error is None for group in groups for t in group)
    assert sum(t.info.get("retries", 0) for group in groups for t in group) >= 2
    events = (run_dir / "events.jsonl").read_text()
    assert "injected: connection reset" in events and "gave no answer" in events
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["infra_error_causes"]["engine_error"] >= 2  # reported, by cause
    assert metrics["summary"]["infra_errors"] >= 2 and metrics["summary"]["lost_samples"] == 0


def test_the_pools_command_limits_reach_the_sandboxes_of_a_run(tmp_path: Path) -> None:
    """`pool.exec` (and `pool.container`) were validated but never applied: a run's backend
    was made with the defaults. With a 40-byte output window every tool result is elided."""
    window = "exec.output_head_bytes=20, exec.output_tail_bytes=20"
    pool = f"pool.overrides=[backend=local, warm_per_image=1, max_live=6, act_slots=4, {window}]"
    overrides = [*TINY_RUN, pool, "steps=1", f"task_ids=[{SPANS_TASK}]"]
    result = CliRunner().invoke(
        cli(run), [str(DEFAULT_RUN_CONFIG), *overrides, "--out", str(tmp_path), "--no-report"]
    )
    assert result.exit_code == 0, result.output
    [run_dir] = list(tmp_path.iterdir())
    assert "bytes elided" in (run_dir / "trajectories.jsonl").read_text()
