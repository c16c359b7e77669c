"""The recompute-driven live bound as an asyncio gate: first come first served under the cap,
a cut stops admissions until completions bring the live set under it, and a conductor run
with `live_bound: recompute` polls the engines' recomputed tokens."""

from __future__ import annotations

import asyncio

from rollout.core.recompute_control import RecomputeControl, RecomputeControlConfig
from rollout.jobs.policies import default_policy_registry
from rollout.runtime.policy import LiveLimitContext
from rollout.runtime.recompute_limit import RecomputeLimit


def _limit(recomputed: list[int], slots: int = 4) -> RecomputeLimit:
    config = RecomputeControlConfig(start_fraction=0.5, cut_cooldown_s=0.0)
    control = RecomputeControl(config, generation_slots=slots, group_size=1)
    return RecomputeLimit(control, lambda: recomputed[0])


async def test_samples_wait_in_arrival_order_while_the_cap_is_reached() -> None:
    limit = _limit([0])
    await limit.enter("a")
    await limit.enter("b")
    third = asyncio.create_task(limit.enter("c"))
    fourth = asyncio.create_task(limit.enter("d"))
    await asyncio.sleep(0)
    assert limit.live == 2 and not third.done() and not fourth.done()
    limit.leave("a")
    await asyncio.sleep(0)
    assert third.done() and not fourth.done()
    fourth.cancel()


async def test_a_cut_holds_newcomers_until_the_live_set_is_under_the_new_cap() -> None:
    recomputed = [0]
    limit = _limit(recomputed, slots=8)  # cap 4
    for name in "abcd":
        await limit.enter(name)
    limit.poll({}, 0.0)
    recomputed[0] = 10_000
    limit.poll({}, 1.0)  # cut: 4 x 0.85 -> 3
    assert limit.control.limit == 3
    waiter = asyncio.create_task(limit.enter("e"))
    limit.leave("a")
    await asyncio.sleep(0)
    assert not waiter.done()  # 3 live, cap 3
    limit.leave("b")
    await asyncio.sleep(0)
    assert waiter.done() and limit.live == 3


def test_the_policy_flag_builds_this_bound_and_needs_the_recompute_counter() -> None:
    ours = default_policy_registry().resolve("conductor")
    policy = ours.with_config(ours.config.model_copy(update={"live_bound": "recompute"}))
    context = LiveLimitContext(64, 1_000_000, 0, group_size=8, recomputed_tokens=lambda: 0)
    limit = policy.live_limit(context)
    assert isinstance(limit, RecomputeLimit) and limit.control.limit == 16
    assert policy.live_limit_kind() == "recompute"
    try:
        policy.live_limit(LiveLimitContext(64, 1_000_000, 0, group_size=8))
    except ValueError as exc:
        assert "recomputed tokens" in str(exc)
    else:
        raise AssertionError("a context without the recompute counter was accepted")
