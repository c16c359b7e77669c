"""The SGLang client's busy time comes from the server's /metrics (running requests at each
poll); a server without /metrics leaves it unknown rather than reading 0 %."""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests.rollout.engines.sglang.servers import FaultProxy, sim_server
from tests.rollout.engines.sglang.test_conformance import client, request, started


class NoMetricsProxy(FaultProxy):
    """A server started without --enable-metrics: /metrics is a 404."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/metrics":
            return web.Response(status=404)
        return await super()._handle(request)


async def test_busy_time_grows_while_the_server_runs_a_request_and_stops_after() -> None:
    async with sim_server() as server, client(server.url) as engine:
        assert engine.stats().extra["busy_s"] == 0.0
        loop = asyncio.get_running_loop()
        began = loop.time()
        task = await started(engine, request(max_new=400))
        await asyncio.sleep(0.3)
        busy_while = engine.stats().extra["busy_s"]
        assert 0.2 <= busy_while <= loop.time() - began
        await task
        await asyncio.sleep(0.3)  # polls of an idle server
        settled = engine.stats().extra["busy_s"]
        await asyncio.sleep(0.3)
        assert engine.stats().extra["busy_s"] == settled


async def test_a_server_without_metrics_reports_no_busy_time() -> None:
    async with (
        sim_server() as server,
        NoMetricsProxy(server.url) as proxy,
        client(proxy.url) as engine,
    ):
        await (await started(engine, request(max_new=200)))
        await asyncio.sleep(0.2)
        assert "busy_s" not in engine.stats().extra
