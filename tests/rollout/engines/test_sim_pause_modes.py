"""The sim engine's SGLang pause modes, per-token versions across a kept request, and flush."""

from __future__ import annotations

import asyncio

import pytest

from rollout.engines.base import FinishReason, GenerateRequest, GenerateResult, SamplingParams
from rollout.engines.sim import SimEngine
from rollout.simulation.vtime import run_virtual
from tests.rollout.engines.doubles import STOP, FixedTokens, make_engine, prompt


def request(rid: str, length: int = 100) -> GenerateRequest:
    return GenerateRequest(
        rid=rid,
        input_ids=prompt(0, length),
        sampling=SamplingParams(max_new_tokens=4096, stop_token_ids=(STOP,)),
        session_id=rid,
    )


async def produced_during_pause(engine: SimEngine, mode: str) -> tuple[int, GenerateResult]:
    """Start a request, pause in `mode` for 1 s, resume; tokens made while paused, result."""
    task = asyncio.create_task(engine.generate(request("a")))
    await asyncio.sleep(0.2)
    await engine.pause_generation(mode)  # type: ignore[arg-type]
    before = engine.counters.decode_tokens
    await asyncio.sleep(1.0)
    during = engine.counters.decode_tokens - before
    assert not task.done()
    await engine.resume()
    return during, await task


@pytest.mark.parametrize("mode", ["in_place", "retract"])
def test_a_keeping_pause_makes_no_progress_and_the_request_completes_after_resume(
    mode: str,
) -> None:
    engine = make_engine(FixedTokens(default=400))
    during, result = run_virtual(produced_during_pause(engine, mode))
    assert during == 0
    assert result.finish_reason is FinishReason.STOP and len(result.output_ids) == 400
    assert result.num_retractions == (1 if mode == "retract" else 0)


def test_an_abort_pause_returns_the_partial_output_at_once() -> None:
    engine = make_engine(FixedTokens(default=400))

    async def main() -> GenerateResult:
        task = asyncio.create_task(engine.generate(request("a")))
        await asyncio.sleep(0.2)
        await engine.pause_generation("abort")
        paused_at = asyncio.get_running_loop().time()
        result = await task
        assert asyncio.get_running_loop().time() == paused_at  # back without waiting
        await engine.resume()
        return result

    assert run_virtual(main()).finish_reason is FinishReason.ABORT


def test_tokens_before_and_after_a_weight_update_inside_a_kept_request_carry_each_version() -> None:
    engine = make_engine(FixedTokens(default=400))

    async def main() -> tuple[int, GenerateResult]:
        task = asyncio.create_task(engine.generate(request("a")))
        await asyncio.sleep(0.2)
        await engine.pause_generation("in_place")
        made = engine.counters.decode_tokens + 1  # the prefill samples the first token
        await engine.update_weights(7)
        await engine.resume()
        return made, await task

    made, result = run_virtual(main())
    assert result.weight_version == 7
    assert result.output_versions == (0,) * made + (7,) * (400 - made)


def test_a_request_that_starts_after_an_update_has_a_single_version() -> None:
    engine = make_engine(FixedTokens(default=20))

    async def main() -> GenerateResult:
        await engine.update_weights(2)
        return await engine.generate(request("a"))

    result = run_virtual(main())
    assert (result.weight_version, result.output_versions) == (2, ())


def test_flush_is_refused_while_a_request_lives_and_done_when_idle() -> None:
    engine = make_engine(FixedTokens(default=200))

    async def main() -> tuple[bool, bool, int]:
        task = asyncio.create_task(engine.generate(request("a")))
        await asyncio.sleep(0.1)
        refused = engine.flush_cache()
        await task
        flushed = engine.flush_cache()
        again = await engine.generate(request("b"))
        return refused, flushed, again.cached_tokens

    refused, flushed, cached = run_virtual(main())
    assert (refused, flushed, cached) == (False, True, 0)
