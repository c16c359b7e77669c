"""Bring-your-own agents through the capture endpoint, driven by the real `openai` SDK, in a
whole `conductor run` (local sandboxes, simulated engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.swe.actions import openai_tool_schemas, swe_tool_specs
from foundation.config import load_config
from rollout.agent_api import tools_system_text
from rollout.cli.run import DEFAULT_RUN_CONFIG
from rollout.core.types import Trajectory
from rollout.jobs.config import RunConfig
from rollout.jobs.run_job import run_job
from rollout.jobs.run_plan import plan_run_config

pytestmark = pytest.mark.slow

TASK = "swe-taskset__spans-remove-drops-right-part"
SYSTEM = "You are a software engineer fixing an issue in a repository."


def _call(name: str, arguments: dict[str, object]) -> str:
    return (
        f"Next step.\n<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"
    )


# Commands whose output is the same in every run (no timings, no dates): the two runs must
# see the same observations for their tokens to match.
ACTIONS = [
    _call("bash", {"command": "printf 'hello\\n' > note.txt && cat note.txt"}),
    _call("bash", {"command": "wc -c note.txt"}),
    _call("submit", {}),
]


def _config(*overrides: str) -> RunConfig:
    return load_config(
        RunConfig,
        DEFAULT_RUN_CONFIG,
        [
            "steps=1", "groups_per_step=1", "group_size=2", "policy=sync", "seed=5",
            f"task_ids=[{TASK}]", f"scripted.actions={json.dumps(ACTIONS)}",
            "pool.overrides=[backend=local, warm_per_image=1, max_live=4, act_slots=2]",
            "model.overrides=[cost.t_weights_s=0.0005]", "trainer.train_time_s=0.1",
            *overrides,
        ],
    )  # fmt: skip


async def _samples(config: RunConfig, out: Path) -> dict[str, Trajectory]:
    result = await run_job(plan_run_config(config, DEFAULT_RUN_CONFIG.parent), out)
    return {t.sample_id: t for batch in result.batches for t in batch.trajectories}


async def test_a_captured_episode_equals_the_native_loops_token_for_token(tmp_path: Path) -> None:
    tools = openai_tool_schemas(swe_tool_specs())
    native_prompt = f"{SYSTEM}\n\n{tools_system_text(tools)}"  # what the agent's tools render
    native = await _samples(
        _config(f"system_prompt={json.dumps(native_prompt)}"), tmp_path / "native"
    )
    captured = await _samples(
        _config(
            f"system_prompt={json.dumps(SYSTEM)}",
            "agent_api.agent=examples/openai_agent.py:agent",
        ),
        tmp_path / "captured",
    )
    assert sorted(native) == sorted(captured) and len(native) == 2
    for sample_id, ours in captured.items():
        theirs = native[sample_id]
        assert ours.infra_error is None and len(ours.turns) == 3
        assert ours.token_ids == theirs.token_ids
        assert ours.loss_mask == theirs.loss_mask
        assert ours.logprobs == theirs.logprobs and ours.versions == theirs.versions
        assert ours.reward == theirs.reward and ours.terminated
        assert [t.tool_name for t in ours.turns] == ["bash", "bash", "submit"]


async def test_a_rewritten_history_ends_the_trajectory_as_a_recorded_fork(tmp_path: Path) -> None:
    samples = await _samples(
        _config("agent_api.agent=tests/rollout/agent_api/agents.py:rewriting"), tmp_path
    )
    for trajectory in samples.values():
        assert trajectory.truncated and trajectory.infra_error is None
        assert trajectory.info["truncation_reason"] == "history_fork"
        assert trajectory.info["fork"]["at_message"] == 2  # the model's answer was dropped
        assert len(trajectory.turns) == 1  # nothing of the fork was tokenized into it


async def test_an_agents_own_reward_is_kept_and_its_crash_is_an_infra_error(
    tmp_path: Path,
) -> None:
    rewarded = await _samples(
        _config("agent_api.agent=tests/rollout/agent_api/agents.py:own_reward"), tmp_path / "a"
    )
    assert {t.reward for t in rewarded.values()} == {0.75}
    crashed = await _samples(
        _config(
            "agent_api.agent=tests/rollout/agent_api/agents.py:crashing",
            "agent_loop.max_attempts=2",
        ),
        tmp_path / "b",
    )
    for trajectory in crashed.values():
        assert (
            trajectory.infra_error is not None and "the agent's own bug" in trajectory.infra_error
        )


async def test_a_call_to_another_samples_url_is_refused_and_its_trajectory_is_intact(
    tmp_path: Path,
) -> None:
    """Issue 28: a call made with one sample's client to another sample's URL ended the
    victim's trajectory (409, recorded as a fork) 3 of 3 times."""
    from tests.rollout.agent_api.agents import INTRUSIONS

    INTRUSIONS.clear()
    samples = await _samples(
        _config(
            f"system_prompt={json.dumps(SYSTEM)}",
            "agent_api.agent=tests.rollout.agent_api.agents:intruder",  # this module's list
        ),
        tmp_path,
    )
    assert INTRUSIONS and set(INTRUSIONS) == {403}
    for trajectory in samples.values():
        assert trajectory.infra_error is None and not trajectory.truncated
        assert "fork" not in trajectory.info and len(trajectory.turns) == 3
