"""A simulated conductor run with several task sources: each source's groups complete with its
own group size, its sampling parameters reach the engine request, and its priority class
reaches the scheduler and the trajectory."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest

from foundation.config import load_config
from rollout.core.classes import PriorityClass
from rollout.core.scheduler_events import SampleAdmitted, SchedulerEvent
from rollout.core.sources import SourceLayout, SourcePrompts, TaskSourceConfig
from rollout.core.types import Group, Trajectory
from rollout.engines.base import GenerateRequest, GenerateResult, SamplingParams
from rollout.engines.sim import SimEngine
from rollout.errors import RolloutError
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import resolve_policy
from rollout.jobs.simulation import simulate_policy
from rollout.jobs.simulation_plan import load_simulation
from rollout.runtime.conductor import Conductor
from rollout.runtime.env_session import EnvSession, EnvSessionError, SampleRef, SourcedSessions
from rollout.simulation.vtime import run_virtual
from rollout.simulation.workload import RoutedTokenModel, SyntheticWorkload, WorkloadConfig
from rollout.trajectories.batch import Batch
from rollout.trajectories.builder import TrajectoryBuilder
from rollout.trajectories.sink import TrajectorySink
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


def test_sourced_sessions_route_by_source_with_local_prompt_indices() -> None:
    opened: list[tuple[str, int]] = []
    warmed: list[tuple[str, tuple[int, ...]]] = []

    class Factory:
        def __init__(self, name: str) -> None:
            self.name = name

        async def open(self, sample: SampleRef) -> EnvSession:
            opened.append((self.name, sample.group.prompt_index))
            raise EnvSessionError("not needed")

        def prewarm(self, prompt_indices: Sequence[int]) -> None:
            warmed.append((self.name, tuple(prompt_indices)))

    layout = SourceLayout.of(
        (SourcePrompts(TaskSourceConfig(name="a"), 3), SourcePrompts(TaskSourceConfig(name="b"), 2))
    )
    sessions = SourcedSessions(layout, {"a": Factory("a"), "b": Factory("b")})
    sessions.prewarm([4, 0, 3, 2])
    assert warmed == [("b", (1, 0)), ("a", (0, 2))]
    group = Group("g1", prompt_index=4, size=1, admitted_step=0, source="b")
    with pytest.raises(EnvSessionError):
        asyncio.run(sessions.open(SampleRef("g1-a0-s0", group, 0)))
    assert opened == [("b", 1)]
    wrong = Group("g2", prompt_index=0, size=1, admitted_step=0, source="b")
    with pytest.raises(RolloutError, match="belongs to 'a'"):
        asyncio.run(sessions.open(SampleRef("g2-a0-s0", wrong, 0)))
    with pytest.raises(RolloutError, match="no session factory"):
        SourcedSessions(layout, {"a": Factory("a")})


def test_the_sink_completes_each_group_at_its_own_size() -> None:
    sink = TrajectorySink(group_size=3)
    sink.expect("small", 1)
    sink.expect("big", 4)

    def sample(group_id: str, index: int) -> Trajectory:
        return TrajectoryBuilder((1, 2)).build(
            sample_id=f"{group_id}-a0-s{index}",
            group_id=group_id,
            prompt_index=0,
            sample_index=index,
            reward=1.0,
        )

    assert sink.add(sample("small", 0)) is not None
    for index in range(3):
        assert sink.add(sample("big", index)) is None
    assert sink.add(sample("big", 3)) is not None
    for index in range(2):
        assert sink.add(sample("default", index)) is None
    assert sink.add(sample("default", 2)) is not None
    assert [len(group) for group in sink.take_batch(3) or []] == [1, 4, 3]


def test_the_routed_token_model_plans_each_session_from_its_own_workload() -> None:
    base = load_config(WorkloadConfig, CONFIGS / "workload" / "short_context.yaml")
    one = SyntheticWorkload(base.model_copy(update={"name": "one"}), seed=0)
    two = SyntheticWorkload(base.model_copy(update={"name": "two"}), seed=0)
    routed = RoutedTokenModel((one.token_model(), two.token_model()))
    env = two.make_env(3, 1)
    request = GenerateRequest(
        rid="r1",
        input_ids=(1, 2, 3),
        sampling=SamplingParams(max_new_tokens=4096),
        session_id=env.session_id,
    )
    plan = routed.plan(request)
    assert len(plan.output_ids) == env.script.turns[0].output_tokens
    assert env.session_id.startswith("two")
