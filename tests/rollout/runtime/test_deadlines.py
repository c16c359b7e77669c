"""Per-step deadlines on the simulated engine in virtual time: the tail is cut at the budget,
truncated samples stay exactly aligned, `drop`/`train` and `proceed`/`wait` do what they say."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from harness.events import EventRecorder, Phase
from rollout.core.scheduler_events import ActStarted, GenerationAborted
from rollout.core.types import Group, Trajectory, _check_trajectory
from rollout.engines.sim import build_sim_engine
from rollout.observe.recorder import step_record
from rollout.observe.run_records import StepRecord
from rollout.runtime.agent_loop import AgentLoop
from rollout.runtime.config import ConductorConfig, DeadlineConfig
from rollout.runtime.env_session import SampleRef
from rollout.simulation.sessions import SimWorkloadSessions
from rollout.simulation.vtime import run_virtual
from rollout.simulation.workload import SyntheticWorkload
from rollout.trajectories.batch import Batch
from tests.rollout.fakes import (
    SHORT_WORKLOAD,
    FlakyEngine,
    RecordingHost,
    SimRollout,
    build_rollout,
    engine_config,
    loop_config,
    model_config,
    train,
    workload_config,
)

GROUP_SIZE = 3
# Without a budget the first step of this rollout takes ~8 virtual seconds.
BUDGET_S = 4.0


def run(deadline: DeadlineConfig, steps: int = 2) -> list[Batch]:
    return run_rollout(deadline, steps)[0]


def run_rollout(deadline: DeadlineConfig, steps: int = 2) -> tuple[list[Batch], SimRollout]:
    async def main() -> tuple[list[Batch], SimRollout]:
        config = ConductorConfig(timeseries_interval_s=1.0, deadline=deadline)
        # the scenarios below (which group a tool call keeps out at the deadline) are timed on
        # this live bound: today's contexts against the device KV
        rollout = build_rollout(
            conductor_config=config,
            groups_per_step=2,
            group_size=GROUP_SIZE,
            policy="no_growth_charge",
        )
        async with rollout.conductor:
            batches = await train(rollout, steps)
        await rollout.engine.aclose()
        return batches, rollout

    return run_virtual(main())


def cut(batch: Batch) -> list[Trajectory]:
    return [t for t in batch.trajectories if t.info.get("truncation_reason") == "deadline"]


def fingerprint(batches: list[Batch]) -> list[object]:
    return [
        (b.step, b.requested_s, b.ready_s, [(t.sample_id, t.token_ids) for t in b.trajectories])
        for b in batches
    ]


def test_without_a_budget_nothing_changes() -> None:
    off = run(DeadlineConfig())
    assert all(batch.deadline is None for batch in off)
    assert all(not cut(batch) for batch in off)
    assert "deadline" not in step_record(off[0], 0.0).to_dict()
    # a budget the run never reaches decides nothing either
    never = run(DeadlineConfig(step_budget_s=1e6))
    assert fingerprint(never) == fingerprint(off)
    assert all(b.deadline is not None and not b.deadline.hit for b in never)


def test_the_step_ends_within_its_budget_and_truncated_samples_stay_aligned() -> None:
    batches = run(DeadlineConfig(step_budget_s=BUDGET_S, truncate_margin_s=1.0))
    first = batches[0]
    assert first.ready_s - first.requested_s <= BUDGET_S + 1.0
    assert first.deadline is not None and first.deadline.hit and not first.deadline.short
    assert len(first.groups) == 2 and first.deadline.truncated > 0
    assert first.deadline.cancelled > 0  # generations of groups this step does not take
    truncated = cut(first)
    assert truncated
    for trajectory in truncated:
        assert trajectory.truncated and trajectory.infra_error is None
        assert trajectory.is_trainable  # `train`: kept with the reward so far
        assert trajectory.reward is not None
        _check_trajectory(trajectory)  # tokens, logprobs, versions, mask and spans agree
        if trajectory.turns:  # nothing after its last turn: the partial output is that turn
            last = trajectory.turns[-1]
            assert max(last.gen_end, last.obs_end) == len(trajectory.token_ids)
    for batch in batches:  # cancelled generations resumed: every group whole, none twice
        for group in batch.groups:
            assert sorted(t.sample_index for t in group) == list(range(GROUP_SIZE))
    ids = [t.sample_id for b in batches for t in b.trajectories]
    assert len(ids) == len(set(ids))


def test_drop_leaves_truncated_samples_out_of_training() -> None:
    batches = run(
        DeadlineConfig(step_budget_s=BUDGET_S, truncate_margin_s=1.0, truncated_samples="drop")
    )
    truncated = cut(batches[0])
    assert truncated
    assert all(not t.is_trainable and t.infra_error for t in truncated)
    assert all(len(group) == GROUP_SIZE for group in batches[0].groups)  # groups still complete


def test_proceed_hands_over_fewer_groups_at_the_deadline_and_says_so() -> None:
    batches = run(
        DeadlineConfig(
            step_budget_s=BUDGET_S,
            truncate_margin_s=0.5,
            short_batch="proceed",
            cut_tool_calls=False,  # a tool call that runs on keeps a group out at the deadline
        )
    )
    first = batches[0]
    assert first.deadline is not None
    assert first.deadline.short and first.deadline.groups == len(first.groups) == 1
    assert first.deadline.wanted == 2
    assert first.ready_s - first.requested_s == BUDGET_S
    line = step_record(first, 0.0).to_dict()
    assert line["deadline"]["short"] is True and line["deadline"]["groups"] == 1
    assert StepRecord.from_dict(line).deadline == line["deadline"]


def test_wait_waits_for_the_missing_groups_past_the_deadline() -> None:
    batches = run(
        DeadlineConfig(step_budget_s=BUDGET_S, truncate_margin_s=0.5, cut_tool_calls=False)
    )
    first = batches[0]
    assert first.deadline is not None and first.deadline.hit
    assert not first.deadline.short and len(first.groups) == 2
    assert first.ready_s - first.requested_s > BUDGET_S


# -- one agent loop, truncated at a chosen moment ---------------------------------------------


THREE_TURNS = (*SHORT_WORKLOAD, "turns.min=3", "turns.max=3", "output_tokens.min=40")
SAMPLE = SampleRef("g0-a0-s0", Group("g0", prompt_index=0, size=1, admitted_step=0), index=0)


def make_loop() -> tuple[AgentLoop, RecordingHost, FlakyEngine]:
    workload = workload_config(1, THREE_TURNS)
    synthetic = SyntheticWorkload(workload, seed=5)
    token_model = synthetic.token_model()
    engine = FlakyEngine(build_sim_engine(engine_config(), model_config(), token_model))
    host = RecordingHost({engine.name: engine})
    sessions = SimWorkloadSessions(synthetic, token_model, bus=host.bus, clock=host.clock)
    return AgentLoop(SAMPLE, sessions, host, loop_config(workload)), host, engine


def truncate_when(ready: Callable[[AgentLoop, RecordingHost], bool]) -> tuple[Trajectory, int]:
    """Play one sample, truncate it once `ready` holds (polled every 10 virtual ms); returns
    its trajectory and how many generation tickets it had taken when it was truncated."""

    async def main() -> tuple[Trajectory, int]:
        loop, host, engine = make_loop()
        async with asyncio.TaskGroup() as tasks:
            playing = tasks.create_task(loop.run())
            while not ready(loop, host):  # noqa: ASYNC110 - a condition on the loop's state
                await asyncio.sleep(0.01)
            tickets = len(host.tickets)
            await loop.truncate()
        await engine.aclose()
        assert len(host.tickets) == tickets  # nothing generated after the truncation
        return playing.result(), tickets

    return run_virtual(main())


def test_a_generation_in_flight_is_aborted_and_its_partial_output_is_the_last_turn() -> None:
    seen: dict[str, float] = {}

    def second_turn_midway(loop: AgentLoop, host: RecordingHost) -> bool:
        if loop.generation_in_flight is None or len(host.tickets) < 2:
            return False
        began = seen.setdefault(loop.generation_in_flight.rid, host.clock.now())
        return host.clock.now() - began >= 0.05  # some tokens generated

    trajectory, _ = truncate_when(second_turn_midway)
    assert trajectory.truncated and trajectory.info["truncation_reason"] == "deadline"
    assert trajectory.reward == 0.0 and trajectory.is_trainable
    _check_trajectory(trajectory)
    last = trajectory.turns[-1]
    assert last.finish_reason == "abort" and last.obs_end == last.obs_start == 0
    assert last.gen_end - last.gen_start > 0 and last.gen_end == len(trajectory.token_ids)
    assert len(trajectory.turns) == 2


def test_a_sample_in_a_tool_call_ends_before_its_next_generation() -> None:
    def acting(loop: AgentLoop, host: RecordingHost) -> bool:
        return bool(host.events) and isinstance(host.events[-1], ActStarted)

    trajectory, _ = truncate_when(acting)
    assert trajectory.truncated and trajectory.info["truncation_reason"] == "deadline"
    _check_trajectory(trajectory)
    last = trajectory.turns[-1]
    assert last.obs_end > last.obs_start  # the tool ran to its end and its output is kept
    assert last.obs_end == len(trajectory.token_ids)
    assert len(trajectory.turns) == 1


def test_cut_tool_calls_end_the_step_within_budget_with_aligned_trajectories() -> None:
    """The same steps as the wait/proceed tests, with tool calls cut: no tail past the budget."""
    batches = run(DeadlineConfig(step_budget_s=BUDGET_S, truncate_margin_s=0.5))
    first = batches[0]
    assert first.deadline is not None and first.deadline.hit and len(first.groups) == 2
    assert first.ready_s - first.requested_s <= BUDGET_S
    assert cut(first)


# -- per-request deadlines, truncation events, held cancels -----------------------------------


def test_requests_sent_while_a_step_waits_carry_its_truncation_point_or_deadline() -> None:
    margin_s = 1.0
    batches, rollout = run_rollout(DeadlineConfig(step_budget_s=BUDGET_S, truncate_margin_s=1.0))
    due = [request.deadline_s for request in rollout.engine.requests]
    allowed = {None}
    for batch in batches:
        allowed |= {batch.requested_s + BUDGET_S - margin_s, batch.requested_s + BUDGET_S}
    assert set(due) <= allowed
    first = batches[0].requested_s
    assert due.count(first + BUDGET_S - margin_s) > 0  # sent before the truncation point
    assert due.count(None) > 0  # sent while the trainer trained: no step was waiting
    # without a budget, no request carries a deadline
    _, plain = run_rollout(DeadlineConfig(), steps=1)
    assert {request.deadline_s for request in plain.engine.requests} == {None}


def test_each_truncation_is_one_truncate_event_naming_its_sample_group_and_reason() -> None:
    batches, rollout = run_rollout(DeadlineConfig(step_budget_s=BUDGET_S, truncate_margin_s=1.0))
    events = rollout.recorder.of_phase(Phase.TRUNCATE)
    truncated = {t.sample_id: (t, batch) for batch in batches for t in cut(batch)}
    assert truncated and {event.sample_id for event in events} == set(truncated)
    for event in events:
        trajectory, batch = truncated[event.sample_id]
        assert event.group_id == trajectory.group_id
        assert event.data["reason"] == "deadline"
        assert event.data["during"] in ("gen", "act", "pre_gen", "other")
        assert event.start_s == event.end_s  # an instant, within its step's truncation window
        assert batch.requested_s + BUDGET_S - 1.0 <= event.start_s <= batch.ready_s
        assert event.to_dict()["phase"] == "truncate"  # as events.jsonl writes it


@dataclass
class Held:
    host: RecordingHost
    trajectory: Trajectory
    steps: EventRecorder


def run_held(release: Callable[[AgentLoop, asyncio.Event], Awaitable[None]]) -> Held:
    """Play one sample; cancel its second generation midway with a hold (as a deadline plan
    does), check it waits (no new ticket, the slot not given back), then `release` it."""

    async def main() -> Held:
        loop, host, engine = make_loop()
        steps = EventRecorder()
        host.bus.subscribe(steps)
        hold = asyncio.Event()
        async with asyncio.TaskGroup() as tasks:
            playing = tasks.create_task(loop.run())
            while loop.generation_in_flight is None or len(host.tickets) < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # some tokens out
            ticket = loop.generation_in_flight
            assert ticket is not None
            ticket.abort_requested, ticket.abort_reason = True, "deadline: cannot help this step"
            ticket.hold = hold
            await engine.abort(ticket.rid)
            await asyncio.sleep(5.0)
            assert len(host.tickets) == 2  # held: no new generation
            assert not any(isinstance(event, GenerationAborted) for event in host.events)
            await release(loop, hold)
        await engine.aclose()
        return Held(host, playing.result(), steps)

    return run_virtual(main())


def test_a_held_cancel_resumes_only_when_its_hold_lifts() -> None:
    async def lift(loop: AgentLoop, hold: asyncio.Event) -> None:
        hold.set()

    held = run_held(lift)
    assert len(held.host.tickets) > 2 and not held.trajectory.truncated
    _check_trajectory(held.trajectory)
    aborted = [event for event in held.host.events if isinstance(event, GenerationAborted)]
    assert len(aborted) == 1 and aborted[0].now_s >= 5.0  # reported when the hold lifted
    (preempt,) = held.steps.of_phase(Phase.PREEMPT)
    assert preempt.data["held"] is True
    waits = [e for e in held.steps.of_phase(Phase.PRE_GEN) if e.data.get("held")]
    assert len(waits) == 1 and waits[0].duration_s > 4.9  # the hold counts as a wait


def test_a_truncation_ends_a_hold_and_keeps_the_partial_turn() -> None:
    async def truncate(loop: AgentLoop, hold: asyncio.Event) -> None:
        await loop.truncate()

    held = run_held(truncate)
    assert len(held.host.tickets) == 2 and held.trajectory.truncated
    _check_trajectory(held.trajectory)
    last = held.trajectory.turns[-1]
    assert last.finish_reason == "abort" and last.gen_end > last.gen_start
    assert last.gen_end == len(held.trajectory.token_ids)
    (event,) = held.steps.of_phase(Phase.TRUNCATE)
    assert event.data["during"] == "other"  # held: neither generating nor waiting for a slot
