"""Pure batching decisions: retraction order, preemption, decode blocks and the admission watch."""

from __future__ import annotations

import pytest

from rollout.engines.sim import CostModelConfig, RetractionPolicy, SimEngineConfig
from rollout.engines.sim.batching import (
    AdmissionWatch,
    RunningView,
    decayed_ratio,
    plan_decode_block,
    preemption_victims,
    retraction_order,
    steps_done_by,
)
from rollout.engines.sim.cost_model import decode_step_time_s

COST = CostModelConfig(
    t_fix_s=0.001, t_weights_s=0.004, b_c_s=0.0001, b_tok_s=0.00001, c_dec_s=1e-8, c_pf_s=1e-9
)


def view(
    index: int, *, priority: int = 0, inp: int = 100, out: int = 10, kv: int = 0
) -> RunningView:
    return RunningView(
        index, seq=index, priority=priority, input_tokens=inp, output_tokens=out, kv_tokens=kv
    )


def test_length_retraction_takes_the_shortest_output_first_then_the_longest_input() -> None:
    running = [view(0, out=50), view(1, out=5, inp=10), view(2, out=5, inp=900)]
    assert retraction_order(RetractionPolicy.LENGTH, running) == [2, 1, 0]


def test_priority_retraction_takes_the_lowest_priority_first() -> None:
    running = [view(0, priority=2, out=1), view(1, priority=0, out=99)]
    assert retraction_order(RetractionPolicy.PRIORITY, running) == [1, 0]


def test_preemption_takes_the_lowest_priority_and_newest_requests_until_the_need_is_covered() -> (
    None
):
    running = [view(0, priority=0, kv=50), view(1, priority=0, kv=50), view(2, priority=1, kv=500)]
    assert preemption_victims(
        running, priority=5, threshold=0, need_tokens=60, need_slot=False
    ) == [1, 0]


def test_preemption_is_all_or_nothing() -> None:
    running = [view(0, priority=0, kv=50), view(1, priority=4, kv=500)]
    assert (
        preemption_victims(running, priority=5, threshold=2, need_tokens=60, need_slot=False) == []
    )


def test_a_free_slot_is_bought_with_one_preemption() -> None:
    running = [view(0, priority=0, kv=50), view(1, priority=0, kv=50)]
    assert preemption_victims(running, priority=1, threshold=0, need_tokens=0, need_slot=True) == [
        1
    ]


def test_a_decode_block_grows_the_context_by_the_batch_each_step() -> None:
    ends = plan_decode_block(
        COST, start_s=10.0, batch=3, context_tokens=1000, max_steps=3
    ).step_ends_s
    durations = [decode_step_time_s(COST, 3, 1000 + 3 * i) for i in range(3)]
    assert ends == pytest.approx([10.0 + sum(durations[: i + 1]) for i in range(3)])


def test_a_decode_block_stops_with_the_step_that_reaches_a_transfer_end() -> None:
    step = decode_step_time_s(COST, 1, 0)
    block = plan_decode_block(
        COST, start_s=0.0, batch=1, context_tokens=0, max_steps=50, stop_at_s=2.5 * step
    )
    assert (len(block.step_ends_s), block.admits_after_last) == (3, False)


@pytest.mark.parametrize(("now", "steps"), [(0.5, 1), (1.0, 1), (1.5, 2), (2.9, 3), (9.0, 3)])
def test_an_interrupted_block_still_finishes_the_step_in_flight(now: float, steps: int) -> None:
    assert steps_done_by([1.0, 2.0, 3.0], now) == steps


def test_the_admission_watch_agrees_with_recomputing_the_budget_each_step() -> None:
    config = SimEngineConfig(clip_max_new_tokens=50)
    remaining = [10, 40, 70, 200]
    need, available, fixed, ratio = 300, 700, 25.0, 0.7
    watch = AdmissionWatch(
        config,
        need_tokens=need,
        available_tokens=available,
        remaining_new_tokens=remaining,
        fixed_reserve_tokens=fixed,
        ratio=ratio,
    )
    for t in range(1, 11):
        reserve = decayed_ratio(config, ratio, t) * sum(min(r - t, 50) for r in remaining) + fixed
        assert watch.admits_after(t) == (need + reserve < available - len(remaining) * t)


def test_a_decode_block_stops_after_the_step_that_lets_the_waiting_head_in() -> None:
    config = SimEngineConfig()
    watch = AdmissionWatch(
        config,
        need_tokens=200,
        available_tokens=800,
        remaining_new_tokens=[1000],
        fixed_reserve_tokens=0.0,
        ratio=0.7,
    )
    block = plan_decode_block(
        COST, start_s=0.0, batch=1, context_tokens=0, max_steps=500, watch=watch
    )
    assert block.admits_after_last
    assert 1 < len(block.step_ends_s) < 500
    assert watch_never_admitted_before(config, len(block.step_ends_s))


def watch_never_admitted_before(config: SimEngineConfig, steps: int) -> bool:
    fresh = AdmissionWatch(
        config,
        need_tokens=200,
        available_tokens=800,
        remaining_new_tokens=[1000],
        fixed_reserve_tokens=0.0,
        ratio=0.7,
    )
    return not any(fresh.admits_after(t) for t in range(1, steps))


def test_new_token_ratio_decays_linearly_to_its_floor() -> None:
    config = SimEngineConfig(
        init_new_token_ratio=0.7, min_new_token_ratio=0.1, new_token_ratio_decay_steps=600
    )
    assert decayed_ratio(config, 0.7, 300) == pytest.approx(0.4)
    assert decayed_ratio(config, 0.7, 10_000) == pytest.approx(0.1)
