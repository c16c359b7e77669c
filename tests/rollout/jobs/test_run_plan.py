"""`conductor run`'s plan: every setting resolved once, each with its origin; what the plan owns
has one home; engines, env sources and policies plug in from outside the package."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from foundation.errors import ConfigError
from rollout.jobs.run_job import run_job
from rollout.jobs.run_plan import IMPLICIT_SOURCE, plan_run
from tests.paths import CONFIGS, REPO_ROOT

DEFAULT = CONFIGS / "run" / "default.yaml"
SPANS_TASK = "swe-taskset__spans-remove-drops-right-part"
LOCAL = ["pool.backend=local", "pool.warm_per_image=1", "pool.max_live=4", "pool.act_slots=2"]
QUICK = ["model.cost.t_weights_s=0.0005", "trainer.train_time_s=0.1", "steps=1", "seed=3"]


def _origin(effective: str, key: str) -> str:
    """The origin comment of the first line that sets `key` in an effective config."""
    for line in effective.splitlines():
        if line.strip().startswith(f"{key}:") and "#" in line:
            return line.rsplit("#", 1)[1].strip()
    raise AssertionError(f"{key} not in the effective config")


def test_a_dotted_override_reaches_a_setting_inside_a_referenced_file() -> None:
    plan = plan_run(DEFAULT, ["pool.act_slots=3", "engine.max_running_requests=8"])
    assert plan.pool.act_slots == 3
    assert plan.engine.model_dump()["max_running_requests"] == 8
    effective = plan.effective_config()
    assert _origin(effective, "act_slots") == "command line"
    assert _origin(effective, "max_running_requests") == "command line"


def test_the_effective_config_says_where_every_setting_came_from() -> None:
    plan = plan_run(DEFAULT, ["group_size=2"])
    effective = yaml.safe_load(plan.effective_config())  # valid YAML; origins are comments
    assert effective["rollout"]["admission"]["group_size"] == 2
    text = plan.effective_config()
    assert "the run's shape (configs/run/default.yaml)" in text
    assert "# policy conductor" in text  # the scheduler flags the policy set
    assert "# configs/rollout/default.yaml" in text
    assert "# default" in text


def test_a_lower_file_that_sets_what_the_run_owns_is_one_error_naming_the_winner(
    tmp_path: Path,
) -> None:
    rollout = yaml.safe_load((CONFIGS / "rollout" / "default.yaml").read_text())
    rollout["admission"]["group_size"] = 8
    (tmp_path / "rollout.yaml").write_text(yaml.safe_dump(rollout))
    with pytest.raises(ConfigError) as caught:
        plan_run(DEFAULT, [f"rollout.path={tmp_path / 'rollout.yaml'}"])
    message = str(caught.value)
    assert "rollout.admission.group_size is set" in message
    assert "K, the run's group_size sets it" in message and "group_size=N" in message


def test_a_policy_flag_set_in_the_rollout_file_says_to_derive_a_policy() -> None:
    with pytest.raises(ConfigError, match=r"the policy's preemption flag sets it.*derived policy"):
        plan_run(DEFAULT, ["rollout.scheduler.preemption=false"])


def test_a_run_without_sources_is_a_run_of_one_swe_source() -> None:
    plan = plan_run(DEFAULT, [f"task_ids=[{SPANS_TASK}]"])
    (source,) = plan.sources
    assert source.name == IMPLICIT_SOURCE and source.task_ids == (SPANS_TASK,)
    assert not plan.mixed


def test_a_relative_tasks_file_on_the_command_line_is_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=str(tmp_path / "mine.jsonl")):
        plan_run(DEFAULT, ["tasks_file=mine.jsonl"])


def test_the_sglang_backend_warns_about_the_engine_asks_it_cannot_honour() -> None:
    plan = plan_run(CONFIGS / "run" / "sglang.yaml", ["policy=traj_async"])
    assert any("FCFS order" in note for note in plan.notes)
    ours = plan_run(CONFIGS / "run" / "sglang.yaml")
    assert any("agentkv" in note for note in ours.notes)  # the priority KV is server-side


def test_an_unknown_engine_backend_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="Known: sim, sglang"):
        plan_run(DEFAULT, ["engine_backend=vllm"])


def test_an_engine_file_of_another_backend_says_which_file_to_point_at() -> None:
    with pytest.raises(ConfigError, match=r"point engine\.path at its file"):
        plan_run(DEFAULT, ["engine_backend=sglang"])


MY_BACKEND = textwrap.dedent(
    """
    from rollout.engines.registry import SimBackend


    class Mine(SimBackend):
        name = "mine"

        async def connect(self, config, context):
            renamed = config.model_copy(update={"name": "mine"})
            return await super().connect(renamed, context)
    """
)


@pytest.mark.slow
async def test_an_engine_backend_and_an_env_from_outside_the_package_run_under_conductor_run(
    tmp_path: Path,
) -> None:
    """The README's example env, copied outside the package, is a source with one config line;
    the engine backend is a user module too. No project file is edited."""
    shutil.copy(REPO_ROOT / "examples" / "my_env.py", tmp_path / "my_env.py")
    (tmp_path / "my_backend.py").write_text(MY_BACKEND)
    source = (
        f"sources=[{{name: mine, env: '{tmp_path / 'my_env.py'}:MyEnv', num_prompts: 2, "
        "group_size: 2, priority_class: high, temperature: 0.5, script: ['echo hello']}]"
    )
    plan = plan_run(
        DEFAULT,
        [
            source,
            f"engine_backend={tmp_path / 'my_backend.py'}:Mine",
            "groups_per_step=2",
            *LOCAL,
            *QUICK,
        ],
    )
    result = await run_job(plan, tmp_path / "run")
    trajectories = [t for batch in result.batches for t in batch.trajectories]
    assert len(trajectories) == 4 and all(t.infra_error is None for t in trajectories)
    assert {t.reward for t in trajectories} == {1.0}
    assert {t.info["source"] for t in trajectories} == {"mine"}
    assert {t.info["engine"] for t in trajectories} == {"mine"}
    effective = (tmp_path / "run" / "effective_config.yaml").read_text()
    assert "backend mine" in effective


def test_a_users_env_under_the_simulated_engine_needs_scripted_turns(tmp_path: Path) -> None:
    shutil.copy(REPO_ROOT / "examples" / "my_env.py", tmp_path / "my_env.py")
    source = f"sources=[{{name: mine, env: '{tmp_path / 'my_env.py'}:MyEnv'}}]"
    with pytest.raises(ConfigError, match="scripted agent needs its turns: set script"):
        plan_run(DEFAULT, [source])


def test_a_missing_env_class_names_the_source(tmp_path: Path) -> None:
    shutil.copy(REPO_ROOT / "examples" / "my_env.py", tmp_path / "my_env.py")
    source = f"sources=[{{name: mine, env: '{tmp_path / 'my_env.py'}:NoSuchEnv', script: [x]}}]"
    with pytest.raises(ConfigError, match=r"task source 'mine'.*has no 'NoSuchEnv'"):
        plan_run(DEFAULT, [source])
