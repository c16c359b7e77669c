"""Σ T_next against the floor of the consumed samples, part by part (SIMULATED)."""

from __future__ import annotations

import pytest

from rollout.engines.sim.cost_model import CostModelConfig, forward_fixed_s
from rollout.jobs.bench_rollout import plan_runs, simulate_planned
from rollout.observe.engine_work import EngineWork
from rollout.simulation.floor_gap import floor_gap
from rollout.simulation.lower_bound import engine_floor_s, work_terms_s
from tests.paths import CONFIGS

COST = CostModelConfig(
    t_fix_s=0.004, t_weights_s=0.01, b_c_s=1e-6, b_tok_s=2e-6, c_dec_s=4e-8, c_pf_s=1e-10
)
# One sample: a 1,000-token prompt, then 99 decode steps reading 1,001 .. 1,099 tokens.
WORK = EngineWork(
    decode_tokens=99,
    decode_context_tokens=sum(range(1001, 1100)),
    prefill_tokens=1000,
    prefill_attention=1000 * 500.0,
    longest_decode_tokens=99,
)


def _floor_s(work: EngineWork) -> float:
    """On an engine whose prefill forwards hold the whole prompt: one forward, as the floor's."""
    return engine_floor_s(work, COST, kv_pool_tokens=10**6, slots=8, max_prefill_tokens=1000)


def test_a_run_that_computed_the_floors_forwards_and_nothing_more_was_only_idle() -> None:
    """One prefill forward and 99 decode steps of one request is what the floor counts."""
    floor_s = _floor_s(WORK)
    fixed_s = forward_fixed_s(COST, 1000) + 99 * forward_fixed_s(COST, 1)

    gap = floor_gap(
        elapsed_s=floor_s + 5.0,
        floor_s=floor_s,
        consumed=WORK,
        done=WORK,
        done_fixed_s=fixed_s,
        cost=COST,
    )

    assert gap.forwards_s == pytest.approx(0.0, abs=1e-12)
    assert gap.extra_work_s == 0.0
    assert gap.idle_s == pytest.approx(5.0)


def test_recomputation_is_extra_work_and_more_forwards_are_forwards() -> None:
    floor_s = _floor_s(WORK)
    fixed_s = forward_fixed_s(COST, 1000) + 99 * forward_fixed_s(COST, 1)
    # the prompt prefilled again (an eviction), in a forward of its own
    again = EngineWork(prefill_tokens=1000, prefill_attention=1000 * 500.0)
    done = WORK + again
    elapsed_s = floor_s + sum(work_terms_s(again, COST)) + forward_fixed_s(COST, 1000)

    gap = floor_gap(
        elapsed_s=elapsed_s,
        floor_s=floor_s,
        consumed=WORK,
        done=done,
        done_fixed_s=fixed_s + forward_fixed_s(COST, 1000),
        cost=COST,
    )

    assert gap.extra_work_s == pytest.approx(sum(work_terms_s(again, COST)))
    assert gap.forwards_s == pytest.approx(forward_fixed_s(COST, 1000))
    assert gap.idle_s == pytest.approx(0.0, abs=1e-12)
    forwards, extra, idle = gap.parts_of_floor
    assert 1 + forwards + extra + idle == pytest.approx(elapsed_s / floor_s)


def test_a_gap_needs_an_engine() -> None:
    with pytest.raises(ValueError, match="at least one engine"):
        floor_gap(
            elapsed_s=1.0, floor_s=1.0, consumed=WORK, done=WORK, done_fixed_s=1.0, cost=COST,
            engines=0,
        )  # fmt: skip


@pytest.mark.parametrize("mixed", [False, True])
def test_a_simulated_runs_parts_add_up_to_its_t_next_over_its_floor(mixed: bool) -> None:
    """On a KV-tight run the engine's own counters put every second of Σ T_next somewhere:
    the floor, forwards beyond it, work beyond the consumed samples' once-over, idle."""
    overrides = [
        "steps=2",
        "groups_per_step=2",
        "group_size=2",
        "trainer.train_time_s=1",
        "policies=[conductor]",
        f"engine.overrides=[max_running_requests=32,mixed_chunk={str(mixed).lower()}]",
    ]
    (run,) = plan_runs(
        CONFIGS / "simulate" / "short_context.yaml",
        overrides,
        [0],
        variants=(),
        record_dir=None,
        config_policies=True,
    )

    outcome = simulate_planned(run)

    summary = outcome.summary
    gap = summary.floor_gap
    assert gap is not None and summary.floor_t_next_s is not None
    assert gap.elapsed_s == pytest.approx(sum(summary.t_next_s))
    assert gap.floor_s == pytest.approx(summary.floor_t_next_s * len(summary.t_next_s))
    # the floor is one: the engine ran at least its forwards and computed at least its work
    assert gap.forwards_s >= -1e-9 and gap.extra_work_s >= -1e-9
    # the parts count the engine's busy time up to the last batch (not what ran after it);
    # between its completion and its hand-over the trainer was busy for at most a step (1 s)
    busy_s = sum(stats.extra["busy_s"] for stats in outcome.engine_stats)
    assert gap.floor_s + gap.forwards_s + gap.extra_work_s <= busy_s + 1e-9
    assert gap.idle_s >= -1.0
