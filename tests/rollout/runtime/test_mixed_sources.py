"""A simulated conductor run with several task sources: each source's groups complete with its
own group size, its sampling parameters reach the engine request, and its priority class
reaches the scheduler and the trajectory."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from harness.config import load_config
from rollout.core.classes import PriorityClass
from rollout.core.scheduler_events import SampleAdmitted, SchedulerEvent
from rollout.engines.base import GenerateRequest, GenerateResult
from rollout.engines.sim import SimEngine
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import resolve_policy
from rollout.jobs.simulation import load_simulation, simulate_policy
from rollout.runtime.conductor import Conductor
from rollout.sim.vtime import run_virtual
from rollout.trajectories.batch import Batch
from tests.paths import CONFIGS

SHORT = str(CONFIGS / "workload" / "short_context.yaml")


def _simulate_config() -> SimulateConfig:
    return SimulateConfig.model_validate(
        {
            "steps": 3,
            "policies": ["conductor"],
            "groups_per_step": 4,
            "group_size": 3,
            "workload": {"path": SHORT},
            "model": {"path": str(CONFIGS / "model" / "qwen3_8b_h200.yaml")},
            "engine": {
                "path": str(CONFIGS / "engine" / "sim.yaml"),
                "overrides": ["max_running_requests=8"],
            },
            "rollout": {"path": str(CONFIGS / "rollout" / "default.yaml")},
            "trainer": {"train_time_s": 2.0},
            "write_trajectories": False,
            "sources": [
                {
                    "name": "multi",
                    "weight": 0.5,
                    "workload": {"path": SHORT, "overrides": ["name=multi", "num_groups=8"]},
                },
                {
                    "name": "single",
                    "weight": 0.5,
                    "priority_class": "high",
                    "group_size": 2,
                    "temperature": 0.3,
                    "top_p": 0.5,
                    "max_new_tokens": 512,
                    "workload": {
                        "path": SHORT,
                        "overrides": [
                            "name=single",
                            "num_groups=8",
                            "turns.median=1",
                            "turns.max=1",
                        ],
                    },
                },
            ],
        }
    )


def test_two_sources_complete_with_their_sizes_sampling_and_classes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests: list[GenerateRequest] = []
    admitted: list[SampleAdmitted] = []
    original_generate = SimEngine.generate
    original_report = Conductor.report

    async def generate(self: SimEngine, request: GenerateRequest) -> GenerateResult:
        requests.append(request)
        return await original_generate(self, request)

    def report(self: Conductor, event: SchedulerEvent) -> None:
        if isinstance(event, SampleAdmitted):
            admitted.append(event)
        original_report(self, event)

    monkeypatch.setattr(SimEngine, "generate", generate)
    monkeypatch.setattr(Conductor, "report", report)
    batches: list[Batch] = []
    simulation = load_simulation(_simulate_config(), CONFIGS / "simulate")
    run_virtual(simulate_policy(simulation, resolve_policy("conductor"), on_batch=batches.append))

    groups = [group for batch in batches for group in batch.groups]
    assert len(groups) == 12
    sizes: dict[str, set[int]] = defaultdict(set)
    for group in groups:
        (source,) = {t.info["source"] for t in group}
        sizes[source].add(len(group))
        assert sorted(t.sample_index for t in group) == list(range(len(group)))
        klass = "high" if source == "single" else "normal"
        assert {t.info["priority_class"] for t in group} == {klass}
    assert dict(sizes) == {"multi": {3}, "single": {2}}

    by_session: dict[str, Any] = {}
    for request in requests:
        by_session[request.session_id] = request.sampling
    single = [s for sid, s in by_session.items() if sid.startswith("single")]
    multi = [s for sid, s in by_session.items() if sid.startswith("multi")]
    assert single and multi
    assert {(s.temperature, s.top_p) for s in single} == {(0.3, 0.5)}
    assert max(s.max_new_tokens for s in single) <= 512
    default = simulation.agent_loop
    assert {(s.temperature, s.top_p) for s in multi} == {(default.temperature, default.top_p)}
    assert max(s.max_new_tokens for s in multi) > 512

    source_of = {group[0].group_id: group[0].info["source"] for group in groups}
    expected = {"single": PriorityClass.HIGH, "multi": PriorityClass.NORMAL}
    seen = [
        (source_of[event.group_id], event.priority_class)
        for event in admitted
        if event.group_id in source_of
    ]
    assert {source for source, _ in seen} == {"single", "multi"}
    assert all(klass is expected[source] for source, klass in seen)


def test_mixed_example_config_loads() -> None:
    config = load_config(SimulateConfig, CONFIGS / "simulate" / "mixed.yaml")
    simulation = load_simulation(config, CONFIGS / "simulate")
    shares = {s.config.name: s.config.weight for s in simulation.sources}
    assert shares == {"swe": 0.7, "single_turn": 0.3, "aux": 0.1}
    assert {s.config.name: s.config.priority_class for s in simulation.sources} == {
        "swe": PriorityClass.NORMAL,
        "single_turn": PriorityClass.HIGH,
        "aux": PriorityClass.LOW,
    }


def test_source_names_must_be_unique() -> None:
    raw = _simulate_config().model_dump(mode="json")
    raw["sources"][1]["name"] = "multi"
    with pytest.raises(ValueError, match="repeat"):
        SimulateConfig.model_validate(raw)
