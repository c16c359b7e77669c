"""`AgentApiServer`: the OpenAI-compatible HTTP endpoint of bring-your-own agents.

Each sample attempt gets its own base URL, `http://HOST:PORT/s/<token>/v1`: the token routes a
call to the session that owns the sample (`register`). Served: `POST /chat/completions`
(non-streaming) and `GET /models`. Errors use OpenAI's shape, `{"error": {"message", "type",
"code"}}`, so SDKs raise them as API errors with the message.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

__all__ = ["AgentApiServer", "ApiReply", "CallHandler", "api_error"]

ApiReply = tuple[int, dict[str, Any]]
CallHandler = Callable[[dict[str, Any]], Awaitable[ApiReply]]


def api_error(status: int, message: str, kind: str = "invalid_request_error") -> ApiReply:
    return status, {"error": {"message": message, "type": kind, "code": status}}


class AgentApiServer:
    """See the module docstring. `start()` it, hand out `base_url(token)`s, `aclose()` it."""

    def __init__(self, model: str = "conductor", host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model
        self._host = host
        self._port = port
        self._handlers: dict[str, CallHandler] = {}
        self._runner: web.AppRunner | None = None
        self._bound_port = 0

    async def start(self) -> AgentApiServer:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("POST", "/s/{token}/v1/chat/completions", self._chat)
        app.router.add_route("GET", "/s/{token}/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        self._bound_port = int(self._runner.addresses[0][1])
        return self

    async def aclose(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> AgentApiServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def register(self, handler: CallHandler) -> str:
        """A new token whose calls go to `handler`; returns it."""
        token = secrets.token_urlsafe(12)
        self._handlers[token] = handler
        return token

    def unregister(self, token: str) -> None:
        self._handlers.pop(token, None)

    def base_url(self, token: str) -> str:
        if not self._bound_port:
            raise RuntimeError("start() the agent API server first")
        return f"http://{self._host}:{self._bound_port}/s/{token}/v1"

    async def _chat(self, request: web.Request) -> web.Response:
        handler = self._handlers.get(request.match_info["token"])
        if handler is None:
            return _reply(api_error(404, "unknown or finished sample (its episode is over)"))
        try:
            body = await request.json()
        except json.JSONDecodeError as exc:
            return _reply(api_error(400, f"the body is not JSON: {exc}"))
        if not isinstance(body, dict):
            return _reply(api_error(400, "the body must be a JSON object"))
        if body.get("stream"):
            return _reply(api_error(400, "streaming is not supported; call with stream=false"))
        if int(body.get("n") or 1) != 1:
            return _reply(api_error(400, "n must be 1: each sample is one trajectory"))
        return _reply(await handler(body))

    async def _models(self, request: web.Request) -> web.Response:
        if request.match_info["token"] not in self._handlers:
            return _reply(api_error(404, "unknown or finished sample"))
        model = {"id": self.model, "object": "model", "owned_by": "aio-conductor"}
        return _reply((200, {"object": "list", "data": [model]}))


def _reply(reply: ApiReply) -> web.Response:
    status, payload = reply
    return web.json_response(payload, status=status)
