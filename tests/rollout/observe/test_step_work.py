"""Spec of the per-step split of engine time by whose groups it served (an estimate)."""

from __future__ import annotations

import pytest

from harness.events import StepEvent
from rollout.engines.sim.cost_model import CostModelConfig, step_time_s
from rollout.observe.run_records import StepRecord
from rollout.observe.step_work import request_cost_s, step_work

COST = CostModelConfig(
    t_fix_s=0.001, t_weights_s=0.01, b_c_s=0.0001, b_tok_s=0.00001, c_dec_s=1e-7, c_pf_s=1e-9
)
STEPS = [StepRecord(1, 10.0, ("a",)), StepRecord(2, 30.0, ("b",))]


def _gen(group: str, start: float, end: float, tokens: int = 10, prompt: int = 100) -> StepEvent:
    data = {"tokens": tokens, "prompt_tokens": prompt, "cached_tokens": prompt}
    return StepEvent("gen", start, end, f"{group}-a0-s0", group, data)


def test_a_lone_decode_costs_what_its_steps_cost_on_the_model() -> None:
    alone = request_cost_s(COST, decode_tokens=3, prompt_tokens=100, cached_tokens=100, batch=1)
    contexts = (100, 101, 102)
    steps = sum(step_time_s(COST, decode_requests=1, decode_context_tokens=L) for L in contexts)
    assert alone == pytest.approx(steps)


def test_a_bigger_batch_shares_the_fixed_step_time_and_a_cache_miss_adds_prefill() -> None:
    shared = request_cost_s(COST, decode_tokens=3, prompt_tokens=100, cached_tokens=100, batch=3)
    alone = request_cost_s(COST, decode_tokens=3, prompt_tokens=100, cached_tokens=100, batch=1)
    assert alone - shared == pytest.approx(3 * (COST.t_fix_s + COST.t_weights_s) * (1 - 1 / 3))
    missed = request_cost_s(COST, decode_tokens=3, prompt_tokens=100, cached_tokens=60, batch=3)
    prefill = 40 * (COST.b_c_s + COST.b_tok_s) + COST.c_pf_s * 40 * (60 + 20)
    assert missed - shared == pytest.approx(prefill)


def test_work_goes_to_the_step_that_consumed_its_group_or_to_later_or_to_none() -> None:
    events = [_gen("a", 1.0, 2.0), _gen("b", 3.0, 4.0), _gen("x", 5.0, 6.0)]
    one = request_cost_s(COST, decode_tokens=10, prompt_tokens=100, cached_tokens=100, batch=2)
    first, second = step_work(STEPS, events, COST, batches=[2.0, 2.0])
    assert (first.own_s, first.later_s, first.unconsumed_s) == pytest.approx((one, one, one))
    assert (second.own_s, second.later_s, second.unconsumed_s) == (0.0, 0.0, 0.0)
    assert first.own_share == pytest.approx(1 / 3)
    assert (first.duration_s, second.duration_s) == (10.0, 20.0)


def test_a_request_across_a_boundary_is_split_by_time_and_nothing_counts_after_the_end() -> None:
    events = [_gen("b", 8.0, 12.0), _gen("b", 29.0, 35.0), _gen("b", 31.0, 33.0)]
    one = request_cost_s(COST, decode_tokens=10, prompt_tokens=100, cached_tokens=100, batch=1)
    first, second = step_work(STEPS, events, COST, batches=[1.0, 1.0])
    assert first.later_s == pytest.approx(one / 2)
    assert second.own_s == pytest.approx(one / 2 + one / 6)


def test_each_step_needs_its_mean_batch() -> None:
    with pytest.raises(ValueError, match="one mean batch per step"):
        step_work(STEPS, [], COST, batches=[1.0])
