"""LiveKVGate: new samples start only while the live contexts fit the KV budget."""

from __future__ import annotations

import asyncio

import pytest

from rollout.runtime.live_gate import LiveKVGate


async def _started(gate: LiveKVGate, sample_id: str) -> asyncio.Task[None]:
    task = asyncio.create_task(gate.enter(sample_id))
    await asyncio.sleep(0)
    return task


async def test_samples_start_while_live_contexts_fit_the_budget() -> None:
    gate = LiveKVGate(budget_tokens=1000)
    await gate.enter("a")
    gate.update("a", 400)
    await gate.enter("b")  # 400 + expected first context 400 fits
    assert gate.live == 2 and gate.live_tokens == 800


async def test_a_new_sample_waits_while_the_budget_is_used_and_starts_when_one_leaves() -> None:
    gate = LiveKVGate(budget_tokens=1000)
    await gate.enter("a")
    gate.update("a", 900)
    waiting = await _started(gate, "b")
    assert not waiting.done() and gate.waiting == 1
    gate.leave("a")
    await waiting
    assert gate.live == 1


@pytest.mark.parametrize(("budget", "starts"), [(650, True), (550, False)])
async def test_a_newcomer_counts_as_the_mean_first_context_seen(budget: int, starts: bool) -> None:
    gate = LiveKVGate(budget_tokens=budget)
    await gate.enter("a")
    gate.update("a", 100)
    await gate.enter("b")
    gate.update("b", 300)  # live 400; a newcomer is expected at (100 + 300) / 2 = 200
    newcomer = await _started(gate, "c")
    assert newcomer.done() is starts
    newcomer.cancel()


async def test_waiting_samples_start_in_arrival_order() -> None:
    gate = LiveKVGate(budget_tokens=100)
    await gate.enter("a")
    gate.update("a", 100)
    second = await _started(gate, "b")
    third = await _started(gate, "c")
    gate.leave("a")
    await second
    assert not third.done()


async def test_one_sample_is_always_live_even_if_it_alone_exceeds_the_budget() -> None:
    gate = LiveKVGate(budget_tokens=10)
    await gate.enter("a")
    gate.update("a", 5000)
    gate.leave("a")
    await gate.enter("b")
    assert gate.live == 1


async def test_a_cancelled_waiter_takes_no_place() -> None:
    gate = LiveKVGate(budget_tokens=100)
    await gate.enter("a")
    gate.update("a", 100)
    cancelled = await _started(gate, "b")
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    gate.leave("a")
    assert gate.live == 0 and gate.waiting == 0


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        LiveKVGate(budget_tokens=0)


async def test_before_any_context_is_known_a_newcomer_counts_as_the_prior() -> None:
    gate = LiveKVGate(budget_tokens=1000, prior_first_tokens=400)
    await gate.enter("a")
    await gate.enter("b")  # 800 expected
    third = await _started(gate, "c")  # 1,200 would exceed the budget
    assert not third.done()
    third.cancel()
