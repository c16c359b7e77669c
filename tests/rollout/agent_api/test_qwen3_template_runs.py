"""Qwen3's own chat template end to end, on a locally built tokenizer carrying it: through the
agent endpoint (`conductor serve-agent-api`, the agent's `tools` rendered by the template) and
through a native `conductor run`. Qwen3 rewrites earlier turns (it drops the empty think block
of the last assistant turn once a message follows); the trajectory keeps what the model saw."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from rollout.cli.run import DEFAULT_RUN_CONFIG, run
from rollout.cli.serve_agent import serve_agent_api
from rollout.core.types import Trajectory
from rollout.trajectories.hf_tokenizer import HFTokenizer
from rollout.trajectories.writers import read_jsonl_groups
from tests.rollout.agent_api.agents import RECORDED
from tests.rollout.trajectories.local_tokenizer import (
    QWEN_ADDED_TOKENS,
    save_local_tokenizer,
    trl_chat_template,
)

TASK = "swe-taskset__spans-remove-drops-right-part"
TINY = [
    "steps=1", "groups_per_step=1", "group_size=2", "trainer.train_time_s=0.1",
    f"task_ids=[{TASK}]", "scripted.fix_probability=1",
    "pool.overrides=[backend=local, warm_per_image=1, max_live=4, act_slots=2]",
    "model.overrides=[cost.t_weights_s=0.0005]",
]  # fmt: skip
# What a tool observation (one or more in a row) and the next generation prompt look like after
# a model turn that wrote its own end-of-turn token.
OBSERVATION = re.compile(
    r"\n<\|im_start\|>user(\n<tool_response>\n.*?\n</tool_response>)+<\|im_end\|>\n"
    r"<\|im_start\|>assistant\n",
    re.DOTALL,
)


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_local_tokenizer(
        tmp_path_factory.mktemp("qwen3"), trl_chat_template("qwen3"), QWEN_ADDED_TOKENS
    )


def invoke(command: Any, args: list[str]) -> None:
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def samples(out: Path) -> list[Trajectory]:
    [run_dir] = list(out.iterdir())
    return [t for group in read_jsonl_groups(run_dir / "trajectories.jsonl") for t in group]


def model_texts(tokenizer: HFTokenizer, trajectory: Trajectory) -> list[str]:
    """Each turn's model text, its end-of-turn token (which the model wrote) left off."""
    end = tokenizer.special_token_id("<|im_end|>")
    texts = []
    for turn in trajectory.turns:
        span = trajectory.token_ids[turn.gen_start : turn.gen_end]
        assert span[-1] == end
        texts.append(tokenizer.decode(span[:-1]))
    return texts


def test_the_agent_endpoint_renders_with_qwen3s_template_and_tools(
    qwen3_dir: Path, tmp_path: Path
) -> None:
    """Every sample's tokens equal Qwen3's own render of the agent's final history (tools
    included) with the model's texts as the assistant messages."""
    RECORDED.clear()
    invoke(
        serve_agent_api,
        ["tests.rollout.agent_api.agents:recording", *TINY, f"tokenizer_path={qwen3_dir}",
         "--out", str(tmp_path), "--no-report"],
    )  # fmt: skip
    tokenizer = HFTokenizer(qwen3_dir)
    trajectories = samples(tmp_path)
    assert trajectories and all(t.infra_error is None and t.reward == 1.0 for t in trajectories)
    for trajectory in trajectories:
        history, tools = RECORDED[trajectory.sample_id]
        texts = iter(model_texts(tokenizer, trajectory))
        conversation = [
            {"role": "assistant", "content": next(texts)} if m["role"] == "assistant" else m
            for m in history
        ]
        last = max(i for i, m in enumerate(conversation) if m["role"] == "assistant")
        expected = tokenizer.backend.apply_chat_template(
            conversation[:last], tools=tools, tokenize=False, add_generation_prompt=True
        )
        expected += conversation[last]["content"] + "<|im_end|>"
        assert tokenizer.decode(trajectory.token_ids) == expected
        assert "# Tools" in expected and len(trajectory.turns) >= 3


def test_a_native_run_renders_with_qwen3s_template(qwen3_dir: Path, tmp_path: Path) -> None:
    invoke(run, [str(DEFAULT_RUN_CONFIG), *TINY, f"tokenizer_path={qwen3_dir}",
                 "--out", str(tmp_path), "--no-report"])  # fmt: skip
    tokenizer = HFTokenizer(qwen3_dir)
    trajectories = samples(tmp_path)
    assert len(trajectories) >= 2 and all(t.infra_error is None for t in trajectories)
    for trajectory in trajectories:
        texts = model_texts(tokenizer, trajectory)
        ids = trajectory.token_ids
        assert tokenizer.decode(ids[: trajectory.turns[0].gen_start]).startswith(
            "<|im_start|>system\n"
        )
        for turn, after in zip(trajectory.turns, trajectory.turns[1:], strict=False):
            between = tokenizer.decode(ids[turn.gen_end : after.gen_start])
            assert OBSERVATION.fullmatch(between), between
        assert len(texts) == len(trajectory.turns) >= 3
