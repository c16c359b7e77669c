"""Prefix-aware placement by task source in a simulated run (`scheduler.source_affinity`):
two engines, two sources whose groups each share a source-wide system prompt. With the rule
each source's prompt is prefilled on fewer engines and more prompt tokens hit the cache."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from rollout.engines.base import GenerateRequest, GenerateResult
from rollout.engines.sim import SimEngine
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import resolve_policy
from rollout.jobs.simulation import simulate_policy
from rollout.jobs.simulation_plan import load_simulation
from rollout.simulation.vtime import run_virtual
from tests.paths import CONFIGS

SHORT = str(CONFIGS / "workload" / "short_context.yaml")
PREFIX = 2048  # tokens of each source's system prompt


def write_trace(path: Path, prefix_id: str) -> str:
    turn = {"output_tokens": 40, "observation_tokens": 40, "tool": "shell", "latency_s": 0.5}
    last = {"output_tokens": 20, "tool": "submit", "latency_s": 0.2}
    with path.open("w") as file:
        for group in range(8):
            for sample in range(2):
                record = {
                    "group": f"{prefix_id}-{group}",
                    "sample": sample,
                    "prompt_tokens": PREFIX + 300,
                    "prefix_tokens": PREFIX,
                    "prefix_id": prefix_id,
                    "reset_s": 0.5 * group,  # staggered env starts: groups arrive one by one
                    "turns": [turn, last],
                }
                file.write(json.dumps(record) + "\n")
    return str(path)


def config(tmp_path: Path, affinity: bool) -> SimulateConfig:
    def source(name: str, weight: float) -> dict[str, Any]:
        trace = write_trace(tmp_path / f"{name}.jsonl", f"system-{name}")
        overrides = [f"name={name}", "num_groups=8", f"trace={trace}"]
        return {"name": name, "weight": weight, "workload": {"path": SHORT, "overrides": overrides}}

    return SimulateConfig.model_validate(
        {
            "steps": 6,
            "policies": ["conductor"],
            "groups_per_step": 2,
            "group_size": 2,
            "workload": {"path": SHORT},
            "model": {"path": str(CONFIGS / "model" / "qwen3_8b_h200.yaml")},
            "engine": {
                "path": str(CONFIGS / "engine" / "sim.yaml"),
                # the prompts stay cached across weight updates (placement is the point here)
                "overrides": ["max_running_requests=16", "flush_cache_on_weight_update=false"],
            },
            "rollout": {
                "path": str(CONFIGS / "rollout" / "default.yaml"),
                "overrides": [f"scheduler.source_affinity={str(affinity).lower()}"],
            },
            "trainer": {"train_time_s": 2.0},
            "write_trajectories": False,
            "cluster": {"engines": 2},
            "sources": [source("swe", 0.75), source("math", 0.25)],
        }
    )


def placement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, affinity: bool
) -> tuple[dict[str, set[int]], float]:
    """Per source, the engines that prefilled its system prompt; the share of the system
    prompts' tokens that first turns found cached (the prefix hit rate)."""
    prefilled: dict[str, set[int]] = defaultdict(set)
    tokens = [0, 0]  # system-prompt tokens cached, asked for
    original = SimEngine.generate

    async def generate(self: SimEngine, request: GenerateRequest) -> GenerateResult:
        result = await original(self, request)
        if result.cached_tokens < PREFIX:  # the system prompt was computed here
            prefilled[request.session_id.split("/")[0]].add(id(self))
        if len(request.input_ids) == PREFIX + 300:  # a first turn: its prompt is all it has
            tokens[0] += min(result.cached_tokens, PREFIX)
            tokens[1] += PREFIX
        return result

    monkeypatch.setattr(SimEngine, "generate", generate)
    simulation = load_simulation(config(tmp_path, affinity), CONFIGS / "simulate")
    run_virtual(simulate_policy(simulation, resolve_policy("conductor")))
    monkeypatch.undo()
    return dict(prefilled), tokens[0] / tokens[1]


def test_each_sources_prompt_is_prefilled_on_fewer_engines_with_the_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, hit_before = placement(tmp_path, monkeypatch, affinity=False)
    after, hit_after = placement(tmp_path, monkeypatch, affinity=True)
    assert set(before) == set(after) == {"swe", "math"}
    engines_before = {name: len(engines) for name, engines in before.items()}
    engines_after = {name: len(engines) for name, engines in after.items()}
    assert engines_after == {"swe": 1, "math": 1}  # each prompt prefilled on one engine only
    assert sum(engines_before.values()) > 2  # without the rule a source lands on both
    assert hit_after > hit_before
