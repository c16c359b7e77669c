"""SimEngine fidelity: closed-form step times, KV-bound throughput, SGLang abort and retraction."""

from __future__ import annotations

import asyncio

import pytest

from rollout.engines.base import (
    Engine,
    EngineError,
    FinishReason,
    GenerateRequest,
    GenerateResult,
    KVHint,
    KVHintKind,
    SamplingParams,
)
from rollout.engines.sim import (
    CostModelConfig,
    LRURadixKV,
    ServedModelConfig,
    SimEngine,
    SimEngineConfig,
    TokenSeq,
)
from rollout.engines.sim.cost_model import (
    decode_step_time_s,
    forward_fixed_s,
    prefill_attention_units,
    step_time_s,
)
from rollout.observe.engine_work import EngineWork
from rollout.simulation.lower_bound import work_terms_s
from rollout.simulation.vtime import run_virtual
from tests.rollout.engines.doubles import COST, MODEL, STOP, FixedTokens, make_engine, prompt


def request(
    rid: str, ids: tuple[int, ...], max_new: int = 4096, priority: int = 0
) -> GenerateRequest:
    return GenerateRequest(
        rid=rid,
        input_ids=ids,
        sampling=SamplingParams(max_new_tokens=max_new, stop_token_ids=(STOP,)),
        session_id=rid,
        priority=priority,
    )


async def timed(engine: SimEngine, req: GenerateRequest) -> tuple[GenerateResult, float]:
    result = await engine.generate(req)
    return result, asyncio.get_running_loop().time()


def prefill_s(*chunks: tuple[int, int]) -> float:
    """One prefill step over (new tokens, prefix tokens) chunks."""
    return step_time_s(
        COST,
        decode_requests=0,
        decode_context_tokens=0,
        prefill_tokens=sum(n for n, _ in chunks),
        prefill_attention=sum(prefill_attention_units(n, p) for n, p in chunks),
    )


def test_sim_engine_satisfies_the_engine_protocol() -> None:
    assert isinstance(make_engine(FixedTokens()), Engine)


def test_one_request_takes_a_prefill_step_then_one_decode_step_per_further_token() -> None:
    engine = make_engine(FixedTokens(default=5))

    result, done_s = run_virtual(timed(engine, request("a", prompt(0, 1000))))

    expected = prefill_s((1000, 0)) + sum(decode_step_time_s(COST, 1, 1001 + i) for i in range(4))
    assert (len(result.output_ids), result.finish_reason) == (5, FinishReason.STOP)
    assert done_s == pytest.approx(expected, rel=1e-12)
    assert engine.counters.busy_s == pytest.approx(expected, rel=1e-12)


def test_requests_arriving_together_share_prefill_and_decode_steps() -> None:
    engine = make_engine(FixedTokens({"a": 3, "b": 5}))

    async def main() -> tuple[tuple[GenerateResult, float], tuple[GenerateResult, float]]:
        return await asyncio.gather(
            timed(engine, request("a", prompt(0, 100))),
            timed(engine, request("b", prompt(5000, 200))),
        )

    (_, a_done), (_, b_done) = run_virtual(main())

    prefill = prefill_s((100, 0), (200, 0))
    a_expected = prefill + decode_step_time_s(COST, 2, 302) + decode_step_time_s(COST, 2, 304)
    b_expected = a_expected + decode_step_time_s(COST, 1, 203) + decode_step_time_s(COST, 1, 204)
    assert (a_done, b_done) == (
        pytest.approx(a_expected, rel=1e-12),
        pytest.approx(b_expected, rel=1e-12),
    )


def test_the_engine_counts_what_its_forwards_computed_and_their_fixed_part() -> None:
    """What `rollout.simulation.floor_gap` sets against the floor: with them the busy time is
    each forward's fixed part plus its tokens' work, to the last second."""
    engine = make_engine(FixedTokens({"a": 3, "b": 5}))

    async def main() -> None:
        await asyncio.gather(
            engine.generate(request("a", prompt(0, 100))),
            engine.generate(request("b", prompt(5000, 200))),
        )

    run_virtual(main())

    counters = engine.counters
    assert counters.decode_context_tokens == 302 + 304 + 203 + 204  # as the step times above
    assert counters.prefill_attention == (
        prefill_attention_units(100, 0) + prefill_attention_units(200, 0)
    )
    assert counters.forward_fixed_s == pytest.approx(
        forward_fixed_s(COST, 300) + 2 * forward_fixed_s(COST, 2) + 2 * forward_fixed_s(COST, 1)
    )
    work = EngineWork(
        decode_tokens=counters.decode_tokens,
        decode_context_tokens=counters.decode_context_tokens,
        prefill_tokens=counters.prefill_tokens,
        prefill_attention=counters.prefill_attention,
    )
    assert counters.busy_s == pytest.approx(
        counters.forward_fixed_s + sum(work_terms_s(work, COST)), rel=1e-12
    )


def test_a_long_prompt_is_prefilled_in_chunks_that_attend_to_the_earlier_chunks() -> None:
    engine = make_engine(FixedTokens(default=1), chunked_prefill_tokens=8192)

    _, done_s = run_virtual(timed(engine, request("a", prompt(0, 20_000))))

    assert done_s == pytest.approx(
        prefill_s((8192, 0)) + prefill_s((8192, 8192)) + prefill_s((3616, 16384)), rel=1e-12
    )


def test_a_full_pool_decodes_at_the_kv_bandwidth_limit() -> None:
    """Aggregate decode tokens/s -> 1/(c_dec × mean context) once KV reads dominate (§9.2)."""
    batch, context, output = 128, 20_000, 50
    engine = make_engine(FixedTokens(default=output), capacity_tokens=batch * (context + 128))

    async def main() -> None:
        await asyncio.gather(
            *(
                engine.generate(request(f"r{i}", prompt(i * 10**6, context), max_new=output))
                for i in range(batch)
            )
        )

    run_virtual(main())

    decode_tokens = batch * (output - 1)
    closed_form = sum(
        decode_step_time_s(COST, batch, batch * (context + 1 + step)) for step in range(output - 1)
    )
    decode_busy_s = engine.counters.busy_s - engine.counters.prefill_busy_s
    bound = 1 / (COST.c_dec_s * (context + output / 2))
    assert engine.counters.decode_tokens == decode_tokens
    assert decode_busy_s == pytest.approx(closed_form, rel=1e-9)
    assert 0.9 * bound < decode_tokens / decode_busy_s < bound


def test_abort_returns_the_partial_output_and_its_resubmission_hits_the_prefix_cache() -> None:
    engine = make_engine(FixedTokens(default=500))
    first = request("a", prompt(0, 1000))

    async def main() -> tuple[GenerateResult, GenerateResult]:
        task = asyncio.create_task(engine.generate(first))
        await asyncio.sleep(0.3)
        await engine.abort("a")
        partial = await task
        resumed = await engine.generate(request("a2", first.input_ids + partial.output_ids))
        return partial, resumed

    partial, resumed = run_virtual(main())

    assert partial.finish_reason is FinishReason.ABORT
    assert 0 < len(partial.output_ids) < 500
    assert partial.output_ids == tuple(range(1_000_000, 1_000_000 + len(partial.output_ids)))
    assert resumed.cached_tokens == (1000 + len(partial.output_ids) - 1) // 64 * 64


def test_aborting_a_queued_request_returns_at_once_with_no_output() -> None:
    engine = make_engine(FixedTokens(default=50), max_running_requests=1)

    async def main() -> tuple[GenerateResult, float]:
        running = asyncio.create_task(engine.generate(request("run", prompt(0, 100))))
        queued = asyncio.create_task(engine.generate(request("queued", prompt(10**6, 100))))
        await asyncio.sleep(0.01)
        await engine.abort("queued")
        result = await queued
        now = asyncio.get_running_loop().time()
        await running
        return result, now

    result, returned_at = run_virtual(main())
    assert (result.finish_reason, result.output_ids, returned_at) == (FinishReason.ABORT, (), 0.01)


def test_running_out_of_kv_retracts_a_request_which_later_completes_unchanged() -> None:
    tokens = FixedTokens(default=800)
    engine = make_engine(tokens, capacity_tokens=2944, clip_max_new_tokens=1)

    async def main() -> tuple[GenerateResult, GenerateResult]:
        return await asyncio.gather(
            engine.generate(request("a", prompt(0, 1000))),
            engine.generate(request("b", prompt(10**6, 1000))),
        )

    results = run_virtual(main())

    assert [len(r.output_ids) for r in results] == [800, 800]
    assert sorted(r.num_retractions for r in results)[-1] >= 1
    assert engine.counters.retractions >= 1
    assert all(r.finish_reason is FinishReason.STOP for r in results)


def test_a_high_priority_arrival_preempts_a_low_priority_request_when_enabled() -> None:
    engine = make_engine(
        FixedTokens({"low": 400, "high": 20}),
        max_running_requests=1,
        schedule_policy="priority",
        priority_preemption=True,
    )

    async def main() -> tuple[tuple[GenerateResult, float], tuple[GenerateResult, float]]:
        low = asyncio.create_task(timed(engine, request("low", prompt(0, 500), priority=0)))
        await asyncio.sleep(0.2)
        high = await timed(engine, request("high", prompt(10**6, 500), priority=1))
        return await low, high

    (low, low_done), (high, high_done) = run_virtual(main())
    assert high_done < low_done
    assert (low.num_retractions, len(low.output_ids), high.num_retractions) == (1, 400, 0)
    assert engine.counters.preemptions == 1


def test_without_preemption_a_high_priority_arrival_waits_for_the_running_request() -> None:
    engine = make_engine(
        FixedTokens({"low": 400, "high": 20}), max_running_requests=1, schedule_policy="priority"
    )

    async def main() -> tuple[float, float]:
        low = asyncio.create_task(timed(engine, request("low", prompt(0, 500), priority=0)))
        await asyncio.sleep(0.2)
        _, high_done = await timed(engine, request("high", prompt(10**6, 500), priority=1))
        _, low_done = await low
        return low_done, high_done

    low_done, high_done = run_virtual(main())
    assert low_done < high_done


def test_a_request_reports_how_long_it_queued_before_its_first_forward() -> None:
    engine = make_engine(FixedTokens({"first": 50, "second": 5}), max_running_requests=1)

    async def main() -> tuple[GenerateResult, float, GenerateResult, float]:
        first = asyncio.create_task(timed(engine, request("first", prompt(0, 500))))
        await asyncio.sleep(0)
        second, second_done = await timed(engine, request("second", prompt(10**6, 500)))
        first_result, first_done = await first
        return first_result, first_done, second, second_done

    first, first_done, second, second_done = run_virtual(main())
    assert first.queued_s == 0.0  # an idle engine starts it at once
    # The single slot frees when `first` finishes: that whole time was spent queued.
    assert second.queued_s == pytest.approx(first_done, rel=1e-9)
    assert 0 < second.queued_s < second_done


def test_a_prefix_evicted_to_host_is_loaded_back_over_the_link_before_its_prefill() -> None:
    tokens = FixedTokens(default=1)
    engine = make_engine(tokens, capacity_tokens=4096, host_tokens=8192, max_running_requests=1)
    first = prompt(0, 2000)

    async def main() -> tuple[GenerateResult, float, float]:
        await engine.generate(request("a", first))
        await engine.generate(request("b", prompt(10**6, 4000)))  # pushes "a" to host
        start = asyncio.get_running_loop().time()
        again, done = await timed(engine, request("a2", (*first, 1)))
        return again, start, done

    again, start, done = run_virtual(main())
    loaded = 1984  # whole pages of "a"'s 2000-token prompt
    link_s = 15e-6 + loaded * MODEL.kv_bytes_per_token / 47e9
    assert again.cached_tokens == loaded
    assert engine.counters.host_hit_tokens == loaded
    assert done - start == pytest.approx(link_s + prefill_s((17, loaded)), rel=1e-9)


def test_pause_aborts_in_flight_work_and_holds_new_requests_until_resume() -> None:
    engine = make_engine(FixedTokens(default=400))

    async def main() -> tuple[GenerateResult, float, float]:
        running = asyncio.create_task(engine.generate(request("a", prompt(0, 100))))
        await asyncio.sleep(0.1)
        await engine.pause()
        partial = await running
        later = asyncio.create_task(timed(engine, request("b", prompt(10**6, 100))))
        await asyncio.sleep(5.0)
        resumed_at = asyncio.get_running_loop().time()
        await engine.resume()
        _, done = await later
        return partial, resumed_at, done

    partial, resumed_at, done = run_virtual(main())
    assert partial.finish_reason is FinishReason.ABORT
    assert done > resumed_at


def test_results_carry_the_weight_version_installed_before_they_finish() -> None:
    engine = make_engine(FixedTokens(default=3))

    async def main() -> GenerateResult:
        await engine.update_weights(7)
        return await engine.generate(request("a", prompt(0, 100)))

    assert run_virtual(main()).weight_version == 7


def test_a_duplicate_rid_in_flight_is_rejected() -> None:
    engine = make_engine(FixedTokens(default=100))

    async def main() -> None:
        task = asyncio.create_task(engine.generate(request("same", prompt(0, 100))))
        await asyncio.sleep(0)
        try:
            with pytest.raises(EngineError, match="already in flight"):
                await engine.generate(request("same", prompt(0, 100)))
        finally:
            await task

    run_virtual(main())


def test_a_prompt_longer_than_the_context_limit_is_rejected_with_advice() -> None:
    model = ServedModelConfig.model_validate({**MODEL.model_dump(), "max_context_tokens": 50})
    engine = make_engine(FixedTokens(), model=model)
    with pytest.raises(EngineError, match="truncate"):
        run_virtual(engine.generate(request("long", prompt(0, 60))))


def test_max_new_tokens_cuts_a_turn_with_a_length_finish() -> None:
    engine = make_engine(FixedTokens(default=50))
    result = run_virtual(engine.generate(request("a", prompt(0, 100), max_new=10)))
    assert (len(result.output_ids), result.finish_reason) == (10, FinishReason.LENGTH)


async def test_the_engine_paces_itself_on_an_ordinary_event_loop() -> None:
    fast = CostModelConfig(t_fix_s=1e-4, t_weights_s=1e-4, b_c_s=0, b_tok_s=0, c_dec_s=0, c_pf_s=0)
    model = ServedModelConfig.model_validate({**MODEL.model_dump(), "cost": fast.model_dump()})
    async with make_engine(FixedTokens(default=5), model=model) as engine:
        result = await engine.generate(request("a", prompt(0, 10)))
    assert len(result.output_ids) == 5


def test_with_mixed_chunks_decoding_continues_during_another_requests_prefill() -> None:
    def finish_time_of_a(mixed: bool) -> float:
        engine = make_engine(FixedTokens({"a": 40, "b": 1}), mixed_chunk=mixed)

        async def main() -> float:
            a = asyncio.create_task(timed(engine, request("a", prompt(0, 100))))
            await asyncio.sleep(0.05)
            await engine.generate(request("b", prompt(10**6, 8000)))
            return (await a)[1]

        return run_virtual(main())

    assert finish_time_of_a(mixed=True) < finish_time_of_a(mixed=False)


def test_the_priority_policy_admits_waiting_requests_by_priority_then_arrival() -> None:
    engine = make_engine(FixedTokens(default=5), max_running_requests=1, schedule_policy="priority")
    order: list[str] = []

    async def run(rid: str, priority: int, start: int) -> None:
        await engine.generate(request(rid, prompt(start * 10**4, 100), priority=priority))
        order.append(rid)

    async def main() -> None:
        first = asyncio.create_task(run("running", 0, 0))
        await asyncio.sleep(0.001)
        queued = [("low", 0), ("high", 5), ("mid", 2), ("high2", 5)]
        async with asyncio.TaskGroup() as tasks:
            for index, (rid, priority) in enumerate(queued, start=1):
                tasks.create_task(run(rid, priority, index))
        await first

    run_virtual(main())
    assert order == ["running", "high", "high2", "mid", "low"]


def test_session_hints_reach_the_kv_backend() -> None:
    engine = make_engine(FixedTokens(default=2))
    kv = engine.kv  # the LRU backend counts hints
    hint = KVHint(KVHintKind.TOOL_WAIT, "s", expected_s=2.0)

    async def main() -> None:
        await engine.send_kv_hints([hint])
        await engine.generate(
            GenerateRequest("a", prompt(0, 10), SamplingParams(4), kv_hints=(hint,))
        )

    run_virtual(main())
    assert isinstance(kv, LRURadixKV)
    assert kv.hints_seen["tool_wait"] == 2


def test_a_weight_update_flushes_the_prefix_cache() -> None:
    engine = make_engine(FixedTokens(default=2))
    ids = prompt(0, 1000)

    async def main() -> tuple[int, int]:
        await engine.generate(request("a", ids))
        warm = await engine.generate(request("b", ids))
        await engine.update_weights(1)
        cold = await engine.generate(request("c", ids))
        return warm.cached_tokens, cold.cached_tokens

    assert run_virtual(main()) == (960, 0)


class BrokenKV(LRURadixKV):
    def commit(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        raise RuntimeError("boom")


def test_a_crash_in_the_step_loop_fails_the_callers_instead_of_hanging_them() -> None:
    config = SimEngineConfig()
    engine = SimEngine(config, MODEL, BrokenKV(10_000, config.page_tokens), FixedTokens())

    async def main() -> None:
        with pytest.raises(EngineError, match="crashed"):
            await engine.generate(request("a", prompt(0, 100)))
        with pytest.raises(EngineError, match="bug"):
            await engine.generate(request("b", prompt(0, 100)))

    run_virtual(main())


# -- request deadlines --------------------------------------------------------------------------


def with_deadline(req: GenerateRequest, deadline_s: float) -> GenerateRequest:
    return GenerateRequest(
        req.rid, req.input_ids, req.sampling, req.session_id, req.priority, deadline_s=deadline_s
    )


def test_a_request_past_its_deadline_is_aborted_with_its_partial_output_aligned() -> None:
    engine = make_engine(FixedTokens(default=500))
    first = with_deadline(request("a", prompt(0, 1000)), deadline_s=0.3)

    partial, returned_s = run_virtual(timed(engine, first))

    assert partial.finish_reason is FinishReason.ABORT
    assert 0 < len(partial.output_ids) < 500
    assert len(partial.output_logprobs) == len(partial.output_ids)
    assert partial.output_ids == tuple(range(1_000_000, 1_000_000 + len(partial.output_ids)))
    # it stops at the first step boundary after its deadline, not at the end of a decode block
    assert 0.3 <= returned_s < 0.3 + 2 * decode_step_time_s(COST, 1, 1000 + 500)
    assert engine.counters.aborted == 1


def test_a_deadline_that_is_not_reached_changes_nothing() -> None:
    plain = run_virtual(timed(make_engine(FixedTokens(default=50)), request("a", prompt(0, 100))))
    due = with_deadline(request("a", prompt(0, 100)), deadline_s=1e6)
    late = run_virtual(timed(make_engine(FixedTokens(default=50)), due))
    assert late == plain and late[0].finish_reason is FinishReason.STOP


def test_a_queued_request_past_its_deadline_returns_at_once_with_no_output() -> None:
    engine = make_engine(FixedTokens(default=50), max_running_requests=1)

    async def main() -> tuple[GenerateResult, float]:
        running = asyncio.create_task(engine.generate(request("run", prompt(0, 100))))
        await asyncio.sleep(0.001)  # it holds the only slot
        queued = with_deadline(request("queued", prompt(10**6, 100)), deadline_s=0.01)
        result, returned_s = await timed(engine, queued)
        await running
        return result, returned_s

    result, returned_s = run_virtual(main())
    assert (result.finish_reason, result.output_ids) == (FinishReason.ABORT, ())
    assert returned_s == pytest.approx(0.01)  # at its deadline, not after the running one
