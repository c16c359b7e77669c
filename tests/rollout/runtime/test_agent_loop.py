"""The action-level agent loop, driven by a recording host over the sim engine (virtual time)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import pytest

from harness.events import Phase, StepEvent
from rollout.core.config import SchedulerConfig
from rollout.core.scheduler import RolloutScheduler
from rollout.core.scheduler_events import (
    ActFinished,
    ActStarted,
    EngineAdded,
    EngineLoad,
    GenerationAborted,
    GenerationFinished,
    SampleAdmitted,
    SampleFinished,
)
from rollout.core.types import NO_VERSION, Group, Trajectory
from rollout.engines.base import (
    FinishReason,
    GenerateRequest,
    GenerateResult,
    KVHintKind,
)
from rollout.engines.sim import build_sim_engine
from rollout.runtime.agent_loop import AgentLoop
from rollout.runtime.env_session import EnvSession, EnvSessionError, SampleRef
from rollout.simulation.sessions import SimWorkloadSessions
from rollout.simulation.vtime import run_virtual
from rollout.simulation.workload import SyntheticWorkload
from tests.rollout.fakes import (
    SHORT_WORKLOAD,
    FlakyEngine,
    RecordingHost,
    engine_config,
    loop_config,
    model_config,
    workload_config,
)

THREE_TURNS = (*SHORT_WORKLOAD, "turns.min=3", "turns.max=3", "output_tokens.min=40")
SAMPLE = SampleRef("g0-a0-s0", Group("g0", prompt_index=0, size=1, admitted_step=0), index=0)


class _NoEnv:
    async def open(self, sample: SampleRef) -> EnvSession:
        raise EnvSessionError("injected: no sandbox")

    def prewarm(self, prompt_indices: Sequence[int]) -> None:
        pass


def make_loop(
    *, fail_calls: set[int] | None = None, no_env: bool = False, **changes: object
) -> tuple[AgentLoop, RecordingHost, FlakyEngine]:
    workload = workload_config(1, THREE_TURNS)
    synthetic = SyntheticWorkload(workload, seed=5)
    token_model = synthetic.token_model()
    engine = FlakyEngine(
        build_sim_engine(engine_config(), model_config(), token_model), fail_calls or ()
    )
    host = RecordingHost({engine.name: engine})
    sessions = (
        _NoEnv()
        if no_env
        else SimWorkloadSessions(synthetic, token_model, bus=host.bus, clock=host.clock)
    )
    return AgentLoop(SAMPLE, sessions, host, loop_config(workload, **changes)), host, engine


def play(**changes: object) -> tuple[Trajectory, RecordingHost, FlakyEngine]:
    async def main() -> tuple[Trajectory, RecordingHost, FlakyEngine]:
        loop, host, engine = make_loop(**changes)  # type: ignore[arg-type]
        trajectory = await loop.run()
        await engine.aclose()
        return trajectory, host, engine

    return run_virtual(main())


def test_the_trajectory_keeps_the_engines_exact_ids_and_logprobs() -> None:
    trajectory, host, _ = play()
    for turn, result in zip(trajectory.turns, host.results, strict=True):
        assert trajectory.token_ids[turn.gen_start : turn.gen_end] == result.output_ids
        assert trajectory.logprobs[turn.gen_start : turn.gen_end] == result.output_logprobs
    assert len(trajectory.turns) == 3 and trajectory.reward is not None


def test_loss_mask_logprobs_and_versions_align_with_tokens() -> None:
    trajectory, _, _ = play()
    generated = {i for turn in trajectory.turns for i in range(turn.gen_start, turn.gen_end)}
    for position, (mask, logprob, version) in enumerate(
        zip(trajectory.loss_mask, trajectory.logprobs, trajectory.versions, strict=True)
    ):
        assert mask == (1 if position in generated else 0)
        if not mask:
            assert (logprob, version) == (0.0, NO_VERSION)
        else:
            assert version == 0


def test_each_turn_prompt_is_the_previous_prompt_plus_what_followed() -> None:
    _, host, _ = play()
    pairs = zip(host.requests, host.results, host.requests[1:], strict=False)
    for before, result, after in pairs:
        assert after.input_ids[: len(before.input_ids)] == before.input_ids
        assert after.input_ids[len(before.input_ids) :][: len(result.output_ids)] == (
            result.output_ids
        )


def test_a_preempted_sample_resumes_from_prompt_plus_its_partial_tokens() -> None:
    async def main() -> tuple[Trajectory, RecordingHost]:
        loop, host, engine = make_loop()
        episode = asyncio.create_task(loop.run())
        await host.ticket_given.wait()
        await asyncio.sleep(0.05)  # part of the first turn is decoded
        ticket = host.tickets[0]
        ticket.abort_requested = True
        await engine.abort(ticket.rid)
        trajectory = await episode
        await engine.aclose()
        return trajectory, host

    trajectory, host = run_virtual(main())
    aborted, resumed = host.results[0], host.requests[1]
    partial = len(aborted.output_ids)
    assert aborted.finish_reason is FinishReason.ABORT and partial > 0
    assert resumed.input_ids == host.requests[0].input_ids + aborted.output_ids
    assert resumed.sampling.max_new_tokens == host.requests[0].sampling.max_new_tokens - partial
    assert host.events[1] == GenerationAborted(SAMPLE.sample_id, partial, host.events[1].now_s)
    assert trajectory.turns[0].preemptions == 1
    unpreempted, _, _ = play()
    assert trajectory.token_ids == unpreempted.token_ids


def test_reported_events_are_legal_for_the_scheduler() -> None:
    _, host, _ = play()
    scheduler = RolloutScheduler(SchedulerConfig())
    scheduler.handle(EngineAdded("sim", EngineLoad(max_running_requests=4, kv_headroom=1.0)))
    for event in host.events:
        scheduler.handle(event)  # raises on an event its state machine does not allow
    kinds = [type(event) for event in host.events]
    assert kinds[0] is SampleAdmitted
    assert kinds[1:] == [GenerationFinished, ActStarted, ActFinished] * 3
    assert host.events[-1] == ActFinished(SAMPLE.sample_id, True, host.events[-1].now_s)


def test_kv_hints_announce_each_tool_wait_and_return() -> None:
    _, host, engine = play()
    assert [hint.kind for hint in host.requests[0].kv_hints] == [KVHintKind.OPEN]
    kinds = [hint.kind for hint in engine.hints]
    wait, done = KVHintKind.TOOL_WAIT, KVHintKind.TOOL_DONE
    assert kinds == [wait, done, wait, done, wait, KVHintKind.CLOSE]
    assert all(hint.expected_s == 1.0 for hint in engine.hints if hint.kind is wait)


def test_no_kv_hints_when_the_policy_turns_them_off() -> None:
    async def main() -> FlakyEngine:
        loop, host, engine = make_loop()
        host.kv_hints = False
        await loop.run()
        await engine.aclose()
        return engine

    engine = run_virtual(main())
    assert engine.hints == [] and all(not request.kv_hints for request in engine.requests)


def test_an_engine_error_ends_the_attempt_with_infra_error() -> None:
    trajectory, host, _ = play(fail_calls={2})
    assert trajectory.infra_error is not None and trajectory.infra_error.startswith("engine_error")
    assert not trajectory.is_trainable
    assert isinstance(host.events[-1], SampleFinished)


def test_an_env_that_cannot_start_is_an_infra_error_not_an_exception() -> None:
    trajectory, host, _ = play(no_env=True)
    assert trajectory.infra_error is not None and "env_start_failed" in trajectory.infra_error
    assert host.events == []


def test_the_loop_truncates_an_episode_at_max_turns() -> None:
    trajectory, host, _ = play(max_turns=2)
    assert len(trajectory.turns) == 2
    assert trajectory.truncated and trajectory.reward == 0.0
    assert trajectory.info["truncation_reason"] == "max_turns"
    assert host.events[-1] == ActFinished(SAMPLE.sample_id, True, host.events[-1].now_s)


def test_turn_boundaries_report_progress_for_the_predictor() -> None:
    trajectory, host, _ = play()
    assert [p.turns_done for p in host.progress] == [1, 2]
    assert host.progress[-1].gen_tokens == sum(
        t.gen_end - t.gen_start for t in trajectory.turns[:2]
    )


class _QueueingEngine(FlakyEngine):
    """Holds every request `queue_s` before the inner engine sees it, and says so."""

    queue_s = 2.0

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        await asyncio.sleep(self.queue_s)
        result = await super().generate(request)
        return replace(result, queued_s=result.queued_s + self.queue_s)


def test_time_queued_inside_the_engine_counts_as_pre_gen_not_gen() -> None:
    async def main() -> tuple[Trajectory, list[StepEvent]]:
        workload = workload_config(1, THREE_TURNS)
        synthetic = SyntheticWorkload(workload, seed=5)
        token_model = synthetic.token_model()
        engine = _QueueingEngine(build_sim_engine(engine_config(), model_config(), token_model))
        host = RecordingHost({engine.name: engine})
        events: list[StepEvent] = []
        host.bus.subscribe(events.append)
        sessions = SimWorkloadSessions(synthetic, token_model, bus=host.bus, clock=host.clock)
        trajectory = await AgentLoop(SAMPLE, sessions, host, loop_config(workload)).run()
        await engine.aclose()
        return trajectory, events

    trajectory, events = run_virtual(main())
    queued = [e for e in events if e.phase is Phase.PRE_GEN and e.data.get("in_engine")]
    generated = [e for e in events if e.phase is Phase.GEN]
    assert len(queued) == len(generated) == 3
    for wait, gen in zip(queued, generated, strict=True):
        assert wait.end_s - wait.start_s == pytest.approx(_QueueingEngine.queue_s)
        assert gen.start_s == pytest.approx(wait.end_s)  # the forward starts when the wait ends
    for turn in trajectory.turns:
        assert turn.pre_gen_s > _QueueingEngine.queue_s - 1e-9
        assert turn.gen_s > 0
