"""Servers for the client conformance suite: `conductor serve-sim` in-process, a real SGLang
server when `CONDUCTOR_SGLANG_URL` names one, and a fault-injecting proxy for either."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from foundation.config import load_config
from rollout.engines.sim.http_server import SimSGLangServer
from rollout.jobs.serve_sim import ServeSimConfig, build_sim_server
from rollout.simulation.serving_model import ServingTokenModel
from tests.paths import CONFIGS

EXTERNAL_URL = os.environ.get("CONDUCTOR_SGLANG_URL", "").rstrip("/")
SERVE_SIM_CONFIG = CONFIGS / "serve_sim" / "default.yaml"


@dataclass(slots=True)
class RunningServer:
    url: str
    server: SimSGLangServer | None  # None: an external SGLang server
    token_model: ServingTokenModel | None = None


@asynccontextmanager
async def sim_server(
    engine_overrides: Sequence[str] = (),
    server_args: dict[str, Any] | None = None,
    serve_overrides: Sequence[str] = (),
) -> AsyncIterator[RunningServer]:
    """`conductor serve-sim` on a free local port, on the running loop."""
    config = load_config(ServeSimConfig, SERVE_SIM_CONFIG, ["port=0", *serve_overrides])
    engine_ref = config.engine.model_copy(
        update={"overrides": (*config.engine.overrides, *engine_overrides)}
    )
    config = config.model_copy(update={"engine": engine_ref})
    parts = build_sim_server(config, SERVE_SIM_CONFIG.parent, server_args=server_args)
    server = parts.server
    port = await server.start("127.0.0.1", 0)
    try:
        yield RunningServer(f"http://127.0.0.1:{port}", server, parts.token_model)
    finally:
        await server.stop()
        await server.engine.aclose()


@asynccontextmanager
async def server_under_test(engine_overrides: Sequence[str] = ()) -> AsyncIterator[RunningServer]:
    """The external server when one is configured, else serve-sim."""
    if EXTERNAL_URL:
        yield RunningServer(EXTERNAL_URL, None)
        return
    async with sim_server(engine_overrides) as running:
        yield running


@dataclass(slots=True)
class FaultProxy:
    """Forwards every call to `target`; the first /generate calls can fail on purpose.

    `fail_statuses`: answer the next /generate calls with these statuses (not forwarded).
    `drop_after_forward`: forward the next N /generate calls, then drop the connection before
    the answer reaches the client (the request did run on the server).
    `hang()`: from then on every call (probes too) is accepted and never answered, as by a
    SIGSTOPped server, until `resume()`.
    """

    target: str
    fail_statuses: list[int] = field(default_factory=list)
    drop_after_forward: int = 0
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None
    _running: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._running.set()

    def hang(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def paths(self) -> list[str]:
        return [path for path, _ in self.calls]

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for seen, body in self.calls if seen == path]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else {}
        self.calls.append((request.path, body))
        await self._running.wait()
        if request.path == "/generate" and self.fail_statuses:
            status = self.fail_statuses.pop(0)
            return web.json_response({"error": {"message": "injected"}}, status=status)
        assert self._session is not None
        async with self._session.request(
            request.method, self.target + request.path_qs, json=body if body else None
        ) as answer:
            payload = await answer.read()
            status, content_type = answer.status, answer.content_type
        if request.path == "/generate" and self.drop_after_forward > 0:
            self.drop_after_forward -= 1
            assert request.transport is not None
            request.transport.close()  # the client sees the connection drop mid-call
        return web.Response(body=payload, status=status, content_type=content_type)

    async def __aenter__(self) -> FaultProxy:
        self._session = aiohttp.ClientSession()
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()


async def wait_until(predicate: Any, timeout_s: float = 10.0) -> None:
    """Poll `predicate()` until it holds (fails the test after `timeout_s`)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)
