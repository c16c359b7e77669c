"""An engine that stops answering is noticed, warned about, routed around, and, if it stays
away, ends the run (real HTTP: serve-sim behind a proxy that can hang like a SIGSTOPped
server)."""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from typing import Any

import pytest

from rollout.engines.base import EngineError, EngineGoneError, FinishReason
from rollout.engines.sglang import SGLangEngineConfig
from rollout.engines.sglang.liveness import (
    EndpointHealth,
    engine_gone,
    generate_timeout_s,
    outage_s,
    probe_endpoints,
)
from tests.rollout.engines.sglang.servers import EXTERNAL_URL, FaultProxy, sim_server
from tests.rollout.engines.sglang.test_conformance import client, request

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="hangs the server: serve-sim only")

FAST = {
    "probe_interval_s": 0.1,
    "probe_timeout_s": 0.3,
    "unresponsive_after_s": 0.5,
    "warning_interval_s": 60,
}


# -- pure decisions -------------------------------------------------------------------------------


def test_a_generate_timeout_grows_with_the_tokens_it_may_generate_up_to_the_cap() -> None:
    config = SGLangEngineConfig(
        generate_timeout_per_token_s=0.1, generate_timeout_slack_s=30, request_timeout_s=500
    )
    assert generate_timeout_s(100, config) == pytest.approx(40.0)
    assert generate_timeout_s(10_000, config) == 500


def test_the_engine_is_gone_only_when_every_endpoint_failed_for_the_outage_limit() -> None:
    first, second = EndpointHealth("a"), EndpointHealth("b")
    first.failed(0.0, "refused")
    assert outage_s([first, second], 100.0) == 0.0  # b answers
    second.failed(50.0, "timed out")
    assert outage_s([first, second], 100.0) == 50.0  # since the last one began failing
    assert not engine_gone([first, second], 100.0, limit_s=60)
    assert engine_gone([first, second], 111.0, limit_s=60)
    assert first.answered() == 0.0 and not engine_gone([first, second], 1000.0, limit_s=60)


def test_warnings_are_rate_limited_per_endpoint() -> None:
    health = EndpointHealth("a")
    assert health.warning_due(0.0, 30) and not health.warning_due(10.0, 30)
    assert health.unwarned == 1 and health.warning_due(31.0, 30)
    assert EndpointHealth("b").warned_s == -math.inf


# -- over HTTP ----------------------------------------------------------------------------------


async def test_probes_answer_in_seconds_for_a_live_a_closed_and_a_hung_endpoint() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening
        async with sim_server() as live, FaultProxy(live.url) as hung:
            hung.hang()
            config = SGLangEngineConfig(endpoints=(live.url, closed_url, hung.url))
            started = time.monotonic()
            probes = await probe_endpoints(config, timeout_s=1.0)
            took = time.monotonic() - started
            hung.resume()
    assert [probe.error is None for probe in probes] == [True, False, False]
    assert "timed out" in str(probes[2].error)
    assert took < 3.0  # bounded by the probe timeout, not the 60 s start-up wait


async def test_an_attempt_with_no_answer_ends_at_its_derived_limit() -> None:
    async with sim_server() as server, FaultProxy(server.url) as proxy:
        limits = {"generate_timeout_per_token_s": 0.01, "generate_timeout_slack_s": 0.5}
        async with client(proxy.url, max_attempts=1, unresponsive_after_s=60, **limits) as engine:
            proxy.hang()
            started = time.monotonic()
            with pytest.raises(EngineError, match=r"timed out after 0\.82 s"):
                await engine.generate(request(max_new=32))  # 0.5 + 32 x 0.01
            assert time.monotonic() - started < 5
            proxy.resume()


async def test_a_hung_endpoint_is_warned_about_and_its_request_finishes_on_the_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        sim_server() as first,
        sim_server() as second,
        FaultProxy(first.url) as first_proxy,
        FaultProxy(second.url) as second_proxy,
    ):
        endpoints = [first_proxy.url, second_proxy.url]
        with caplog.at_level(logging.WARNING, logger="rollout.engines.sglang.client"):
            async with client(first_proxy.url, endpoints=endpoints, **FAST) as engine:
                generating = asyncio.create_task(
                    engine.generate(request(max_new=400, session="s1"))
                )
                await asyncio.sleep(0.3)
                first_proxy.hang()  # SIGSTOP: connections accepted, nothing answered
                result = await asyncio.wait_for(generating, 30)
                first_proxy.resume()
    assert result.finish_reason is not FinishReason.ABORT and len(result.output_ids) > 0
    assert second_proxy.bodies("/generate"), "the retry went to the other endpoint"
    warnings = [r.getMessage() for r in caplog.records if "has not answered" in r.getMessage()]
    assert len(warnings) == 1 and first_proxy.url in warnings[0]
    assert f"its requests go to {second_proxy.url}" in warnings[0]


async def test_a_hung_single_endpoint_is_waited_for_and_the_turn_completes_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with sim_server() as server, FaultProxy(server.url) as proxy:
        with caplog.at_level(logging.WARNING, logger="rollout.engines.sglang.client"):
            async with client(proxy.url, **FAST) as engine:
                proxy.hang()
                generating = asyncio.create_task(engine.generate(request(max_new=32)))
                await asyncio.sleep(1.5)
                assert not generating.done()
                proxy.resume()
                result = await asyncio.wait_for(generating, 30)
    assert len(result.output_ids) > 0
    messages = [record.getMessage() for record in caplog.records]
    assert any("has not answered" in m and "generation waits for it" in m for m in messages)
    assert any("answers again after" in m for m in messages)


async def test_an_engine_that_stays_away_raises_engine_gone_within_its_outage_limit() -> None:
    async with (
        sim_server() as server,
        FaultProxy(server.url) as proxy,
        client(proxy.url, outage_s=1.5, **FAST) as engine,
    ):
        proxy.hang()
        started = time.monotonic()
        with pytest.raises(EngineGoneError, match=r"no endpoint has answered for \d+ s"):
            await engine.generate(request(max_new=32))
        assert time.monotonic() - started < 4
        with pytest.raises(EngineGoneError):  # a weight update too: the run ends there
            await engine.pause()
        proxy.resume()


async def test_a_refused_connection_moves_the_retry_to_the_endpoint_that_answers() -> None:
    async with sim_server() as server, sim_server() as doomed:
        proxy = await FaultProxy(doomed.url).__aenter__()
        changes: dict[str, Any] = {"endpoints": [proxy.url, server.url], **FAST}
        async with client(server.url, **changes) as engine:
            await proxy.__aexit__(None, None, None)  # the server died: connections refused
            result = await engine.generate(request(max_new=16, session="s2"))  # routed to it
    assert len(result.output_ids) > 0 and len(proxy.bodies("/generate")) == 0
