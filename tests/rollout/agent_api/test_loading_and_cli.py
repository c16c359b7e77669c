"""Finding the agent from its spec, and `conductor serve-agent-api` end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from foundation.errors import ConfigError
from rollout.agent_api.loading import load_agent
from rollout.cli.serve_agent import serve_agent_api
from rollout.trajectories.writers import read_jsonl_groups
from tests.paths import REPO_ROOT


def test_an_agent_loads_from_a_module_or_a_file() -> None:
    assert load_agent("examples.openai_agent:agent").__name__ == "agent"
    from_file = load_agent("examples/openai_agent.py:agent", REPO_ROOT)
    assert from_file.__name__ == "agent"
    assert load_agent("examples/openai_agent.py:agent", REPO_ROOT) is from_file  # run once


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("examples.openai_agent", "package.module:function"),
        ("no.such.module:agent", "cannot import"),
        ("examples.openai_agent:missing", "has no 'missing'"),
        ("examples.openai_agent:MAX_CALLS", "async def"),
        ("nowhere/agent.py:agent", "no Python file"),
    ],
)
def test_a_bad_agent_spec_says_what_to_write(spec: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_agent(spec)


def test_serve_agent_api_runs_the_example_agent(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(serve_agent_api)
    overrides = [
        "steps=1", "groups_per_step=1", "group_size=2", "trainer.train_time_s=0.1",
        "task_ids=[swe-taskset__spans-remove-drops-right-part]", "scripted.fix_probability=1",
        "pool.overrides=[backend=local, warm_per_image=1, max_live=4, act_slots=2]",
        "model.overrides=[cost.t_weights_s=0.0005]",
    ]  # fmt: skip
    result = CliRunner().invoke(
        app, ["examples/openai_agent.py:agent", *overrides, "--out", str(tmp_path), "--no-report"]
    )
    assert result.exit_code == 0, result.output
    [run_dir] = list(tmp_path.iterdir())
    samples = [t for group in read_jsonl_groups(run_dir / "trajectories.jsonl") for t in group]
    assert len(samples) >= 2  # the consumed group, and any the staleness bound let finish
    assert {t.reward for t in samples} == {1.0}  # the gold patch, applied through the agent
    assert all(t.infra_error is None and len(t.turns) >= 3 for t in samples)


def test_a_wrong_agent_fails_in_one_line_before_any_run_directory(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(serve_agent_api)
    result = CliRunner().invoke(app, ["nowhere.py:agent", "steps=1", "--out", str(tmp_path)])
    assert result.exit_code == 1 and "no Python file at nowhere.py" in result.output
    assert "Traceback" not in result.output and list(tmp_path.iterdir()) == []
