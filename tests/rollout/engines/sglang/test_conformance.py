"""The SGLang client over real HTTP: every endpoint it uses, aborts, pauses, flushes, priority,
retries. Runs against `conductor serve-sim` in-process, or against a real SGLang server when
`CONDUCTOR_SGLANG_URL` names one (tests that need to shape the server say so and skip there)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from rollout.engines.base import (
    EngineError,
    FinishReason,
    GenerateRequest,
    GenerateResult,
    KVHint,
    KVHintKind,
    SamplingParams,
)
from rollout.engines.sglang import (
    EngineStartupError,
    SGLangEngine,
    SGLangEngineConfig,
)
from rollout.engines.sglang.transport import HTTPTransport
from rollout.trajectories.tokenizer import ByteTokenizer
from tests.rollout.engines.sglang.servers import (
    EXTERNAL_URL,
    FaultProxy,
    server_under_test,
    sim_server,
    wait_until,
)

sim_only = pytest.mark.skipif(bool(EXTERNAL_URL), reason="shapes the server: serve-sim only")
TOKENIZER = ByteTokenizer()
_rids = itertools.count()


def config_for(url: str, **changes: Any) -> SGLangEngineConfig:
    return SGLangEngineConfig.model_validate(
        {
            "endpoints": [url],
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.05,
            "startup_timeout_s": 2.0,
            "poll_interval_s": 0.05,
            **changes,
        }
    )


def request(
    text: str = "Tell me about rollouts.",
    *,
    max_new: int = 32,
    priority: int = 0,
    session: str = "",
) -> GenerateRequest:
    return GenerateRequest(
        rid=f"conformance-{next(_rids):06d}",
        input_ids=tuple(TOKENIZER.encode(text)),
        sampling=SamplingParams(max_new_tokens=max_new, stop_token_ids=(TOKENIZER.eos_token_id,)),
        session_id=session,
        priority=priority,
    )


@asynccontextmanager
async def client(url: str, **changes: Any) -> AsyncIterator[SGLangEngine]:
    engine = await SGLangEngine.connect(config_for(url, **changes), encode=TOKENIZER.encode)
    try:
        yield engine
    finally:
        await engine.aclose()


async def started(engine: SGLangEngine, generate: GenerateRequest) -> asyncio.Task[GenerateResult]:
    """A generation running on the server (its first tokens are out)."""
    task = asyncio.create_task(engine.generate(generate))
    await asyncio.sleep(0.3)
    assert not task.done(), "the request ended before the test could act on it"
    return task


def assert_aligned(result: GenerateResult) -> None:
    assert len(result.output_ids) == len(result.output_logprobs)
    assert all(logprob <= 0 for logprob in result.output_logprobs)


# -- start-up -------------------------------------------------------------------------------------


async def test_connect_reads_capacity_and_stats_need_no_http_call() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        stats = engine.stats()
        assert stats.max_running_requests > 0 and stats.kv_capacity_tokens > 0
        before = engine.transport.calls
        for _ in range(100):
            engine.stats()
        assert engine.transport.calls == before


async def test_an_unreachable_server_fails_start_up_with_what_to_do() -> None:
    with pytest.raises(EngineStartupError, match=r"no SGLang server answers.*start one"):
        await SGLangEngine.connect(config_for("http://127.0.0.1:9", startup_timeout_s=0.2))


@sim_only
async def test_a_server_without_priority_scheduling_is_refused() -> None:
    async with sim_server(
        ["schedule_policy=fcfs", "priority_preemption=false", "kv_backend=radix_lru"]
    ) as server:
        with pytest.raises(EngineStartupError, match="--enable-priority-scheduling"):
            await SGLangEngine.connect(config_for(server.url))
        engine = await SGLangEngine.connect(
            config_for(server.url, require_priority_scheduling=False)
        )
        await engine.aclose()


@sim_only
async def test_a_server_with_its_radix_cache_disabled_is_refused() -> None:
    async with sim_server(server_args={"disable_radix_cache": True}) as server:
        with pytest.raises(EngineStartupError, match="--disable-radix-cache"):
            await SGLangEngine.connect(config_for(server.url))


async def test_a_tokenizer_that_differs_from_the_servers_is_refused() -> None:
    async with server_under_test() as server:
        with pytest.raises(EngineStartupError, match="tokenizer does not match"):
            await SGLangEngine.connect(config_for(server.url), encode=lambda text: [1, 2, 3])


# -- generation and abort -------------------------------------------------------------------------


async def test_a_turn_returns_exact_ids_with_one_logprob_each() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        generate = request()
        result = await engine.generate(generate)
        assert result.rid == generate.rid and result.prompt_tokens == len(generate.input_ids)
        assert result.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
        assert 0 < len(result.output_ids) <= 32
        assert_aligned(result)


async def test_aborting_a_running_request_returns_its_partial_output_and_resumes_cached() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        generate = request(max_new=4000)
        task = await started(engine, generate)
        await engine.abort(generate.rid)
        partial = await task
        assert partial.finish_reason is FinishReason.ABORT and 0 < len(partial.output_ids) < 4000
        assert_aligned(partial)
        resumed = await engine.generate(
            GenerateRequest(
                rid=f"{generate.rid}-resume",
                input_ids=(*generate.input_ids, *partial.output_ids),
                sampling=SamplingParams(max_new_tokens=8, stop_token_ids=(TOKENIZER.eos_token_id,)),
            )
        )
        assert resumed.cached_tokens > 0  # prompt + partial output stayed in the prefix cache


async def test_aborting_a_queued_request_returns_no_output() -> None:
    async with server_under_test() as server, client(server.url, pause_mode="in_place") as engine:
        await engine.pause()  # in place: new requests queue
        generate = request()
        task = asyncio.create_task(engine.generate(generate))
        await asyncio.sleep(0.2)
        await engine.abort(generate.rid)
        result = await asyncio.wait_for(task, 10)
        await engine.resume()
        assert result.finish_reason is FinishReason.ABORT and result.output_ids == ()


async def test_a_request_is_aborted_at_its_deadline_with_its_partial_output() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        loop = asyncio.get_running_loop()
        plain = request(max_new=4000)
        due = GenerateRequest(
            plain.rid, plain.input_ids, plain.sampling, deadline_s=loop.time() + 0.3
        )
        result = await asyncio.wait_for(engine.generate(due), 10)
        assert result.finish_reason is FinishReason.ABORT and 0 < len(result.output_ids) < 4000
        assert_aligned(result)


async def test_a_request_already_past_its_deadline_is_not_sent() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        plain = request()
        late = GenerateRequest(
            plain.rid, plain.input_ids, plain.sampling, deadline_s=asyncio.get_running_loop().time()
        )
        calls = engine.transport.calls
        result = await engine.generate(late)
        assert result.finish_reason is FinishReason.ABORT and result.output_ids == ()
        assert engine.transport.calls == calls  # no /generate (nor anything else) went out


async def test_abort_of_an_unknown_rid_is_ignored() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        await engine.abort("never-sent")


async def test_abort_all_ends_every_request_in_flight() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        tasks = [asyncio.create_task(engine.generate(request(max_new=4000))) for _ in range(4)]
        await asyncio.sleep(0.3)
        await engine.abort_all()
        results = await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert all(result.finish_reason is FinishReason.ABORT for result in results)


# -- pause, weights, flush ------------------------------------------------------------------------


async def test_an_abort_pause_returns_everything_in_flight_then_work_resumes() -> None:
    async with server_under_test() as server, client(server.url, pause_mode="abort") as engine:
        task = await started(engine, request(max_new=4000))
        await engine.pause()
        assert task.done() and task.result().finish_reason is FinishReason.ABORT
        await engine.resume()
        assert (await engine.generate(request())).finish_reason is not FinishReason.ABORT


@pytest.mark.parametrize("mode", ["retract", "in_place"])
async def test_a_keeping_pause_holds_requests_until_continue_then_they_finish(mode: str) -> None:
    async with server_under_test() as server, client(server.url, pause_mode=mode) as engine:
        task = await started(engine, request(max_new=800))
        await engine.pause()
        await asyncio.sleep(0.5)
        assert not task.done()  # kept in the server, making no progress
        await engine.resume()
        result = await asyncio.wait_for(task, 30)
        assert result.finish_reason is not FinishReason.ABORT
        assert_aligned(result)


async def test_tokens_of_a_request_kept_through_a_weight_update_carry_their_versions() -> None:
    async with server_under_test() as server, client(server.url, pause_mode="in_place") as engine:
        task = await started(engine, request(max_new=800))
        await engine.pause()
        await engine.update_weights(1)
        await engine.resume()
        result = await asyncio.wait_for(task, 30)
        assert result.weight_version == 1
        versions = result.output_versions
        assert versions[0] == 0 and versions[-1] == 1 and list(versions) == sorted(versions)
        assert engine.stats().weight_version == 1


async def test_update_weights_tags_the_version_every_later_token_carries() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        await engine.pause()
        await engine.update_weights(3)
        await engine.resume()
        result = await engine.generate(request())
        assert result.weight_version == 3 and result.output_versions == ()


async def test_a_staged_weight_load_runs_inside_update_weights() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        loaded: list[int] = []

        async def load(target: SGLangEngine) -> None:
            await target.update_weights_from_disk("/checkpoints/step-2")
            loaded.append(2)

        engine.stage_weights(2, load)
        await engine.pause()
        await engine.update_weights(2)
        await engine.resume()
        assert loaded == [2] and (await engine.generate(request())).weight_version == 2


async def test_flush_is_refused_while_a_request_runs_and_works_when_idle() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        task = await started(engine, request(max_new=4000))
        with pytest.raises(EngineError, match="refused"):
            await engine.flush_cache()
        await engine.abort_all()
        await task
        await engine.flush_cache()


# -- priority -------------------------------------------------------------------------------------


@sim_only
async def test_a_high_priority_request_preempts_low_ones_when_slots_are_full() -> None:
    async with (
        sim_server(["max_running_requests=2"]) as server,
        client(server.url) as engine,
    ):
        lows = [asyncio.create_task(engine.generate(request(max_new=2000))) for _ in range(2)]
        await asyncio.sleep(0.3)
        high = await engine.generate(request(max_new=20, priority=100))
        assert not any(task.done() for task in lows)  # the high one ran while they waited
        assert high.finish_reason is not FinishReason.ABORT
        await engine.abort_all()
        low_results = await asyncio.wait_for(asyncio.gather(*lows), 10)
        assert any(result.num_retractions > 0 for result in low_results)  # one made room


# -- retries --------------------------------------------------------------------------------------


async def test_a_5xx_is_retried_under_a_new_rid_and_yields_one_turn() -> None:
    async with server_under_test() as server, FaultProxy(server.url, fail_statuses=[503]) as proxy:
        async with client(proxy.url) as engine:
            generate = request()
            result = await engine.generate(generate)
        sent = [body["rid"] for body in proxy.bodies("/generate")]
        assert len(sent) == 2 and sent[0] == generate.rid and sent[1] != generate.rid
        assert not sent[1].startswith(sent[0]) and not sent[0].startswith(sent[1])
        assert {"rid": sent[0]} in proxy.bodies("/abort_request")
        assert result.rid == generate.rid and result.finish_reason is not FinishReason.ABORT
        assert_aligned(result)


async def test_a_dropped_connection_is_retried_and_the_lost_attempt_is_aborted() -> None:
    async with server_under_test() as server, FaultProxy(server.url, drop_after_forward=1) as proxy:
        async with client(proxy.url) as engine:
            generate = request()
            result = await engine.generate(generate)
        first, second = (body["rid"] for body in proxy.bodies("/generate"))
        assert {"rid": first} in proxy.bodies("/abort_request")
        assert result.rid == generate.rid and len(result.output_ids) > 0
        assert_aligned(result)
        assert second != first


async def test_a_4xx_is_not_retried_and_says_why() -> None:
    async with server_under_test() as server, FaultProxy(server.url, fail_statuses=[400]) as proxy:
        async with client(proxy.url) as engine:
            with pytest.raises(EngineError, match=r"rejected .*400"):
                await engine.generate(request())
        assert len(proxy.bodies("/generate")) == 1


async def test_retries_give_up_after_max_attempts_with_the_last_failure() -> None:
    async with (
        server_under_test() as server,
        FaultProxy(server.url, fail_statuses=[500, 502, 503]) as proxy,
        client(proxy.url, max_attempts=3) as engine,
    ):
        with pytest.raises(EngineError, match=r"failed 3 times.*503"):
            await engine.generate(request())


# -- hints, routing, stats ------------------------------------------------------------------------


@sim_only
async def test_out_of_band_kv_hints_reach_the_servers_kv_manager() -> None:
    async with sim_server() as server, FaultProxy(server.url) as proxy:
        async with client(proxy.url) as engine:
            session = "hint-session"
            await engine.generate(request(session=session))
            await engine.send_kv_hints(
                [KVHint(KVHintKind.TOOL_WAIT, session, priority=0, expected_s=1.0)]
            )
        (body,) = proxy.bodies("/kv_hints")
        assert body["kv_hints"]["actions"][0]["payload"]["session_id"] == session


async def test_without_a_hint_endpoint_hints_ride_on_the_sessions_next_request() -> None:
    async with server_under_test() as server, FaultProxy(server.url) as proxy:
        async with client(proxy.url, kv_hints="next_request") as engine:
            session = "rider"
            await engine.send_kv_hints([KVHint(KVHintKind.TOOL_DONE, session)])
            await engine.generate(request(session=session))
        assert "/kv_hints" not in proxy.paths()
        (body,) = proxy.bodies("/generate")
        assert body["kv_hints"]["actions"][0]["action_type"] == "tool_done"


@sim_only
async def test_sessions_stick_to_one_of_two_servers_and_stats_add_both() -> None:
    async with sim_server() as first, sim_server() as second:
        async with client(first.url, endpoints=[first.url, second.url]) as engine:
            for turn in range(3):
                await engine.generate(request(f"turn {turn} of session a", session="a"))
            assert engine._router.home_of("a") is not None
            stats = engine.stats()
            one = await SGLangEngine.connect(config_for(first.url))
            assert stats.max_running_requests == 2 * one.stats().max_running_requests
            await one.aclose()
        assert first.server is not None and second.server is not None
        counts = [s.engine.counters.finished for s in (first.server, second.server)]
        assert sorted(counts) == [0, 3]


async def test_polled_stats_see_the_servers_load() -> None:
    async with server_under_test() as server, client(server.url) as engine:
        tasks = [asyncio.create_task(engine.generate(request(max_new=2000))) for _ in range(3)]
        await wait_until(
            lambda: engine.stats().running_requests + engine.stats().waiting_requests == 3
        )
        assert engine.stats().kv_used_tokens > 0
        await engine.abort_all()
        await asyncio.gather(*tasks)


# -- the rest of the HTTP surface -----------------------------------------------------------------


async def test_health_info_openai_and_metrics_endpoints_answer_in_sglang_shapes() -> None:
    async with server_under_test() as server, aiohttp.ClientSession() as http:
        for path in ("/health", "/health_generate"):
            async with http.get(server.url + path) as answer:
                assert answer.status == 200, path
        async with http.get(server.url + "/get_model_info") as answer:
            assert (await answer.json())["model_path"]
        async with http.get(server.url + "/get_server_info") as answer:
            assert (await answer.json())["internal_states"]
        completion = {"model": "default", "prompt": "The capital of France is", "max_tokens": 8}
        async with http.post(server.url + "/v1/completions", json=completion) as answer:
            body = await answer.json()
            assert body["choices"][0]["text"] and body["usage"]["completion_tokens"] > 0
        chat = {
            "model": "default",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 8,
        }
        async with http.post(server.url + "/v1/chat/completions", json=chat) as answer:
            body = await answer.json()
            assert body["choices"][0]["message"]["content"] and "usage" in body
        async with http.get(server.url + "/metrics") as answer:
            assert "sglang:num_running_reqs" in await answer.text()


async def test_a_malformed_generate_is_a_400_with_a_message() -> None:
    async with server_under_test() as server:
        transport = HTTPTransport(connect_timeout_s=2)
        reply = await transport.request(
            "POST", server.url + "/generate", json_body={"sampling_params": {}}, timeout_s=10
        )
        await transport.aclose()
        assert reply.status == 400 and reply.error_message()
