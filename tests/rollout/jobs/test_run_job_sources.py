"""`conductor run` with task sources: the config is checked with clear errors, and a mixed run
(a SWE source and two example-env sources on the local sandbox) renders each source's prompt
with its own system message, template and tool format, sends its sampling to the engine, and
keeps every trajectory exactly aligned."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from envs.example.env import example_tool_specs
from envs.swe import load_shipped_tasks
from envs.swe.actions import swe_tool_specs
from envs.swe.tool_formats import TOOL_FORMATS, called_tool
from foundation.errors import ConfigError
from rollout.engines.base import GenerateRequest, SamplingParams
from rollout.engines.sim.token_model import TurnPlan
from rollout.jobs.config import RunConfig
from rollout.jobs.run_job import run_job
from rollout.jobs.run_plan import plan_run_config
from rollout.observe.integrity import assess_integrity
from rollout.standins.config import ScriptedPolicyConfig
from rollout.standins.scripted_agent import ScriptedSWEAgent, agent_script
from rollout.trajectories.tokenizer import ByteTokenizer
from rollout.trajectories.writers import read_jsonl_groups
from tests.paths import CONFIGS

MIXED = CONFIGS / "run" / "mixed.yaml"
SPANS_TASK = "swe-taskset__spans-remove-drops-right-part"


def _mixed(sources: list[dict[str, Any]], **fields: Any) -> RunConfig:
    raw = yaml.safe_load(MIXED.read_text())
    return RunConfig.model_validate({**raw, **fields, "sources": sources})


def _error(sources: list[dict[str, Any]], **fields: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        _mixed(sources, **fields)
    return str(caught.value)


# -- config -----------------------------------------------------------------------------------


def test_the_shipped_mixed_config_validates_with_two_sources_of_different_shapes() -> None:
    config = RunConfig.model_validate(yaml.safe_load(MIXED.read_text()))
    swe, example = config.sources
    assert (swe.env, example.env) == ("swe", "example")
    assert swe.group_size != (example.group_size or config.group_size)
    assert swe.priority_class != example.priority_class
    assert swe.tool_format != example.tool_format


def test_source_names_must_be_unique() -> None:
    assert "task source names repeat" in _error([{"name": "a"}, {"name": "a", "env": "example"}])


def test_an_unknown_env_kind_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="Known: swe, example; or name your own"):
        plan_run_config(_mixed([{"name": "a", "env": "chess"}]), MIXED.parent)


def test_an_unknown_tool_format_lists_the_known_ones() -> None:
    message = _error([{"name": "a", "tool_format": "yaml"}])
    assert all(f"'{name}'" in message for name in TOOL_FORMATS)


def test_an_unknown_chat_template_lists_the_known_ones() -> None:
    message = _error([{"name": "a", "chat_template": "llama"}])
    assert all(f"'{name}'" in message for name in ("run", "chatml", "model", "file"))


def test_task_ids_belong_to_swe_sources_only() -> None:
    message = _error([{"name": "ex", "env": "example", "task_ids": [SPANS_TASK]}])
    assert "task_ids and tasks_file are for env: swe" in message


def test_run_level_task_ids_are_refused_next_to_sources() -> None:
    assert "give task_ids / tasks_file to each swe source" in _error(
        [{"name": "a"}], task_ids=[SPANS_TASK]
    )


def test_a_models_own_template_needs_the_runs_tokenizer() -> None:
    assert "set tokenizer_path" in _error([{"name": "a", "chat_template": "model"}])


def test_a_template_file_and_chat_template_file_go_together() -> None:
    assert "go together" in _error([{"name": "a", "chat_template": "file"}])
    assert "go together" in _error([{"name": "a", "chat_template_file": "t.jinja"}])


def test_a_sources_unknown_task_id_is_a_config_error_naming_the_source() -> None:
    config = _mixed([{"name": "mine", "task_ids": ["no-such-task"]}])
    with pytest.raises(ConfigError, match="task source 'mine': unknown SWE task ids"):
        plan_run_config(config, MIXED.parent)


def test_a_run_without_sources_plays_the_hermes_calls_it_always_played() -> None:
    """The single-source run is unchanged: the scripted SWE agent's default turns are the
    Hermes <tool_call> JSON it wrote before tool formats existed."""
    task = next(t for t in load_shipped_tasks() if t.instance_id == SPANS_TASK)
    config = ScriptedPolicyConfig(fix_probability=1.0, max_explore_steps=1)
    script = agent_script(task, random.Random("0/s"), config)
    assert (
        script.actions[-1]
        == 'I\'m done.\n<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    assert script == agent_script(task, random.Random("0/s"), config, tool_format="tool_call")
    assert (
        RunConfig.model_validate(
            yaml.safe_load((CONFIGS / "run" / "default.yaml").read_text())
        ).sources
        == ()
    )


# -- a mixed run ------------------------------------------------------------------------------

SOURCES: list[dict[str, Any]] = [
    {"name": "swe", "task_ids": [SPANS_TASK], "group_size": 1, "tool_format": "tool_call"},
    {
        "name": "ex_xml",
        "env": "example",
        "priority_class": "high",
        "group_size": 3,
        "temperature": 0.3,
        "top_p": 0.5,
        "max_new_tokens": 300,
        "system_prompt": "XML-SYSTEM",
        "chat_template": "chatml",
        "observation_role": "user",
        "tool_format": "tool_call_xml",
    },
    {
        "name": "ex_json",
        "env": "example",
        "priority_class": "low",
        "group_size": 2,
        "temperature": 0.9,
        "max_new_tokens": 200,
        "system_prompt": "JSON-SYSTEM",
        "tool_format": "json",
    },
]


async def test_a_mixed_run_renders_samples_and_tools_per_source_and_stays_aligned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sampling: dict[str, list[SamplingParams]] = {}
    plan = ScriptedSWEAgent.plan

    def recording_plan(self: ScriptedSWEAgent, request: GenerateRequest) -> TurnPlan:
        sampling.setdefault(request.session_id, []).append(request.sampling)
        return plan(self, request)

    monkeypatch.setattr(ScriptedSWEAgent, "plan", recording_plan)
    config = _mixed(
        SOURCES,
        steps=1,
        groups_per_step=3,
        pool={
            "path": "../pool/default.yaml",
            "overrides": ["backend=local", "warm_per_image=1", "max_live=8", "act_slots=4"],
        },
        model={"path": "../model/qwen3_8b_h200.yaml", "overrides": ["cost.t_weights_s=0.0005"]},
        scripted={"fix_probability": 0.5, "max_explore_steps": 0},
        trainer={"train_time_s": 0.1},
    )
    run_dir = tmp_path / "run"
    result = await run_job(plan_run_config(config, MIXED.parent), run_dir)

    by_source = {source["name"]: source for source in SOURCES}
    groups = [group for batch in result.batches for group in batch.groups]
    assert sorted(group[0].info["source"] for group in groups) == sorted(by_source)
    tokenizer = ByteTokenizer()
    for group in groups:
        source = by_source[group[0].info["source"]]
        assert len(group) == source["group_size"]
        for trajectory in group:
            assert trajectory.infra_error is None
            assert trajectory.info["source"] == source["name"]
            assert trajectory.info["priority_class"] == source.get("priority_class", "normal")
            _check_sampling(
                sampling[f"{trajectory.sample_id}/r{trajectory.attempt}"], source, config
            )
            _check_rendering(trajectory, source, config, tokenizer)
    _check_run_dir(run_dir, by_source)


def _check_sampling(
    requests: list[SamplingParams], source: Mapping[str, Any], config: RunConfig
) -> None:
    """Every request of the sample carries its source's sampling (a resumed turn asks for
    fewer tokens: what is left of the turn's budget)."""
    loop = config.agent_loop
    assert {params.temperature for params in requests} == {
        source.get("temperature", loop.temperature)
    }
    assert {params.top_p for params in requests} == {source.get("top_p", loop.top_p)}
    budget = max(params.max_new_tokens for params in requests)
    assert budget == source.get("max_new_tokens", loop.max_new_tokens)


def _check_rendering(
    trajectory: Any, source: Mapping[str, Any], config: RunConfig, tokenizer: ByteTokenizer
) -> None:
    ids = trajectory.token_ids
    assert (
        len(ids)
        == len(trajectory.loss_mask)
        == len(trajectory.logprobs)
        == len(trajectory.versions)
    )
    text = tokenizer.decode(ids)
    system = source.get("system_prompt", config.system_prompt)
    assert text.startswith(f"<|im_start|>system\n{system}\n\n# Tools")
    role = source.get("observation_role", "tool")
    assert f"<|im_start|>{role}\n<returncode>" in text
    other = "user" if role == "tool" else "tool"
    assert f"<|im_start|>{other}\n<returncode>" not in text
    tools = swe_tool_specs() if source["name"] == "swe" else example_tool_specs()
    fmt = source["tool_format"]
    end = tokenizer.special_token_id("<|im_end|>")
    assert trajectory.turns
    generated = 0
    for turn in trajectory.turns:
        span = ids[turn.gen_start : turn.gen_end]
        assert all(trajectory.loss_mask[turn.gen_start : turn.gen_end])
        generated += len(span)
        assert span[-1] == end
        reply = tokenizer.decode(span[:-1])
        assert called_tool(fmt, reply, tools) is not None, reply  # written in its own format
        assert all(called_tool(f, reply, tools) is None for f in TOOL_FORMATS if f != fmt)
    assert sum(trajectory.loss_mask) == generated  # nothing else is trained on


def _check_run_dir(run_dir: Path, by_source: Mapping[str, Mapping[str, Any]]) -> None:
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    consumed = [group for step in steps for group in step["groups"]]
    written = list(read_jsonl_groups(run_dir / "trajectories.jsonl"))
    integrity = assess_integrity(
        [run_dir / "steps.jsonl", run_dir / "trajectories.jsonl", run_dir / "events.jsonl"],
        consumed,
        [group[0].group_id for group in written],
    )
    assert integrity.warnings == () and integrity.groups_in_steps == 3
    admitted = [
        json.loads(line)["fields"]
        for line in (run_dir / "decisions.jsonl").read_text().splitlines()
        if '"SampleAdmitted"' in line
    ]
    classes = {
        group[0].group_id: by_source[group[0].info["source"]].get("priority_class", "normal")
        for group in written
    }
    assert admitted and all(a["priority_class"] == classes[a["group_id"]] for a in admitted)


def test_each_source_renders_with_its_own_template_over_the_runs_tokenizer(
    tmp_path: Path,
) -> None:
    """chat_template: model is the tokenizer's own template, file a Jinja file of the source's,
    chatml ChatML: the same conversation gets each source's template ids."""
    from rollout.trajectories.hf_tokenizer import HFTokenizer
    from rollout.trajectories.tokenizer import ChatPromptBuilder
    from tests.rollout.trajectories.local_tokenizer import CHATML, save_local_tokenizer

    tokenizer = HFTokenizer(save_local_tokenizer(tmp_path / "tok"))
    loud = CHATML.replace("m['role']", "m['role'] | upper").replace("assistant", "ASSISTANT")
    (tmp_path / "loud.jinja").write_text(loud)
    sources = [
        {"name": "model", "chat_template": "model", "system_prompt": "hi"},
        {
            "name": "file",
            "chat_template": "file",
            "chat_template_file": str(tmp_path / "loud.jinja"),
            "system_prompt": "hi",
        },
        {"name": "chatml", "chat_template": "chatml", "system_prompt": "hi"},
    ]
    config = _mixed(sources, tokenizer_path=str(tokenizer.path))
    rendered = {}
    for source in plan_run_config(config, MIXED.parent).sources:
        chat_format = source.chat_format() if source.chat_format is not None else None
        builder = ChatPromptBuilder(
            tokenizer, source.template, [("system", "hi")], chat_format=chat_format
        )
        rendered[source.name] = tokenizer.decode(builder.open_turn())
    assert rendered["model"] == "<|im_start|>system\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert rendered["file"] == "<|im_start|>SYSTEM\nhi<|im_end|>\n<|im_start|>ASSISTANT\n"
    assert rendered["chatml"] == rendered["model"]  # the local tokenizer's template is ChatML
