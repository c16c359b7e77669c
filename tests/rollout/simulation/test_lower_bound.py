"""Spec of the engine-time floor: the work read off trajectories, the floor's arithmetic, and
that no simulated policy beats it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rollout.core.types import Trajectory, Turn
from rollout.engines.sim.cost_model import CostModelConfig, decode_step_time_s
from rollout.observe.engine_work import EngineWork, trajectory_work
from rollout.simulation.lower_bound import engine_floor_s

COST = CostModelConfig(
    t_fix_s=0.001, t_weights_s=0.01, b_c_s=0.0001, b_tok_s=0.00001, c_dec_s=1e-7, c_pf_s=1e-9
)


def _trajectory(prompt: int, turns: list[tuple[int, int]]) -> Trajectory:
    """`turns`: (generated, observed) tokens per turn."""
    spans, at, generated_at = [], prompt, set()
    for index, (generated, observed) in enumerate(turns):
        spans.append(Turn(index, at, at + generated, at + generated, at + generated + observed))
        generated_at.update(range(at, at + generated))
        at += generated + observed
    mask = tuple(1 if i in generated_at else 0 for i in range(at))
    return Trajectory(
        sample_id="g-a0-s0",
        group_id="g",
        prompt_index=0,
        sample_index=0,
        token_ids=tuple(range(at)),
        loss_mask=mask,
        logprobs=(0.0,) * at,
        versions=tuple(0 if bit else -1 for bit in mask),
        prompt_tokens=prompt,
        turns=tuple(spans),
    )


def test_the_work_counts_each_token_once_at_the_context_it_reads() -> None:
    work = trajectory_work(_trajectory(10, [(3, 5), (2, 0)]))
    assert work.decode_tokens == 3  # 2 + 1: each turn's first token comes with its prefill
    assert work.decode_context_tokens == (11 + 12) + 19
    assert work.prefill_tokens == 15
    assert work.prefill_attention == pytest.approx(10 * 5 + 5 * (13 + 2.5))


def test_a_turns_first_token_is_sampled_by_its_prefill_and_not_charged_again_as_decode() -> None:
    """The forward that prefills a turn's input samples its first token (SGLang; the simulated
    engine's `finish_chunk`): a one-token turn needs no decode step at all."""
    work = trajectory_work(_trajectory(100, [(1, 20), (1, 0)]))
    assert (work.decode_tokens, work.decode_context_tokens, work.longest_decode_tokens) == (0, 0, 0)
    assert work.prefill_tokens == 120


def test_the_floor_of_one_request_is_its_decode_steps_when_nothing_else_binds() -> None:
    work = EngineWork(decode_tokens=1, decode_context_tokens=100, longest_decode_tokens=1)
    expected = decode_step_time_s(COST, 1, 100)
    assert engine_floor_s(work, COST, kv_pool_tokens=10_000, slots=8) == pytest.approx(expected)


def test_a_small_kv_pool_forces_more_decode_steps() -> None:
    work = EngineWork(decode_tokens=64, decode_context_tokens=64 * 1_000)
    roomy = engine_floor_s(work, COST, kv_pool_tokens=64_000, slots=64)  # one step holds all
    tight = engine_floor_s(work, COST, kv_pool_tokens=8_000, slots=64)  # 8 steps at least
    fixed = COST.t_fix_s + COST.t_weights_s
    assert tight - roomy == pytest.approx(7 * fixed)


def test_no_work_needs_no_time() -> None:
    assert engine_floor_s(EngineWork(), COST, kv_pool_tokens=1, slots=1) == 0.0


def test_the_floor_waits_for_the_longest_sample_even_with_slots_to_spare() -> None:
    one = EngineWork(decode_tokens=100, decode_context_tokens=100, longest_decode_tokens=100)
    floor = engine_floor_s(one + one, COST, kv_pool_tokens=10**9, slots=64)
    assert floor >= 100 * (COST.t_fix_s + COST.t_weights_s)


def test_engines_in_parallel_split_the_per_token_work_and_the_step_bound() -> None:
    work = EngineWork(
        decode_tokens=6400,
        decode_context_tokens=64_000_000,
        prefill_tokens=10_000,
        prefill_attention=1e8,
        longest_decode_tokens=10,
    )
    one = engine_floor_s(work, COST, kv_pool_tokens=100_000, slots=64, engines=1)
    four = engine_floor_s(work, COST, kv_pool_tokens=100_000, slots=64, engines=4)
    steps_one, steps_four = 640, 160  # the KV pool binds: 64M / 100k, then 64M / 400k
    per_token = COST.b_tok_s * 16_400 + COST.c_dec_s * 64_000_000 + COST.c_pf_s * 1e8
    step_s = COST.t_fix_s + COST.t_weights_s
    assert one == pytest.approx(steps_one * step_s + per_token)
    assert four == pytest.approx(steps_four * step_s + per_token / 4)


def test_one_engine_is_the_default_floor_bit_for_bit() -> None:
    work = EngineWork(decode_tokens=7, decode_context_tokens=333, prefill_tokens=11,
                      prefill_attention=123.4, longest_decode_tokens=3)  # fmt: skip
    default = engine_floor_s(work, COST, kv_pool_tokens=1000, slots=4)
    assert engine_floor_s(work, COST, kv_pool_tokens=1000, slots=4, engines=1) == default
    with pytest.raises(ValueError, match="engine"):
        engine_floor_s(work, COST, kv_pool_tokens=1000, slots=4, engines=0)


def test_prompts_shared_in_the_pool_let_a_step_hold_more_contexts() -> None:
    work = EngineWork(decode_tokens=64, decode_context_tokens=64 * 1_000)
    alone = engine_floor_s(work, COST, kv_pool_tokens=8_000, slots=64)  # 8 steps at least
    shared = replace(work, decode_shared_context_tokens=64 * 500)  # half of each is a shared prompt
    halved = engine_floor_s(shared, COST, kv_pool_tokens=8_000, slots=64)  # 4 steps at least
    assert alone - halved == pytest.approx(4 * (COST.t_fix_s + COST.t_weights_s))


def test_without_mixed_chunks_prefill_forwards_pay_fixed_costs_on_top_of_decode_steps() -> None:
    """SGLang's default (no `--enable-mixed-chunk`): a prefill forward stalls every decode, so
    its fixed cost adds to the decode steps' instead of hiding under them."""
    work = EngineWork(decode_tokens=64, decode_context_tokens=64_000, prefill_tokens=40_000,
                      prefill_attention=4e8, longest_decode_tokens=8)  # fmt: skip
    mixed = engine_floor_s(work, COST, kv_pool_tokens=8_000, slots=64)
    serial = engine_floor_s(work, COST, kv_pool_tokens=8_000, slots=64, max_prefill_tokens=10_000)
    prefill_steps = 4  # 40k tokens, at most 10k a forward
    prefill_fixed = prefill_steps * COST.t_fix_s + max(
        prefill_steps * COST.t_weights_s, 40_000 * COST.b_c_s
    )
    decode_fixed = 8 * (COST.t_fix_s + COST.t_weights_s)  # the pool binds: 64k / 8k steps
    per_token = COST.b_tok_s * 40_064 + COST.c_dec_s * 64_000 + COST.c_pf_s * 4e8
    assert serial == pytest.approx(decode_fixed + prefill_fixed + per_token)
    assert mixed == pytest.approx(max(decode_fixed, 40_064 * COST.b_c_s) + per_token)
    assert serial > mixed


def test_smaller_prefill_forwards_raise_the_floor_only_through_their_fixed_cost() -> None:
    work = EngineWork(prefill_tokens=32_000, prefill_attention=1e8)
    big = engine_floor_s(work, COST, kv_pool_tokens=1000, slots=4, max_prefill_tokens=32_000)
    small = engine_floor_s(work, COST, kv_pool_tokens=1000, slots=4, max_prefill_tokens=1_000)
    # one forward is compute-bound (32k·b_c = 3.2 s ≫ t_weights); 32 small ones still are,
    # and pay t_fix 31 times more
    assert small - big == pytest.approx(31 * COST.t_fix_s)
