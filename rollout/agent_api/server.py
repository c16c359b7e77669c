"""`AgentApiServer`: the OpenAI-compatible HTTP endpoint of bring-your-own agents.

Each sample attempt gets its own base URL, `http://HOST:PORT/s/<token>/v1`, and its own API
key (`register`): the token routes a call to the session that owns the sample, the key proves
the caller is that sample's agent. Served: `POST /chat/completions` (non-streaming) and
`GET /models`. Every call is checked before it reaches a session, in this order:

* an unknown or finished sample's token: 404;
* no `Authorization: Bearer <key>` (the OpenAI SDK's `api_key`): 401; a key that is not this
  sample's (compared in constant time): 403, and the sample is not touched (issue 28: a call
  made with one sample's client to another's URL ended the other's trajectory);
* a body over `max_body_mb`: 413; not UTF-8 JSON, or not a chat call (`validation`): 400.

Errors use OpenAI's shape, `{"error": {"message", "type", "code"}}`, so SDKs raise them as
API errors with the message; unknown routes and methods get the same JSON (404, 405), and a
handler that fails gets a 500 with its message, never a traceback page.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from rollout.agent_api.validation import bearer_key, chat_body_error, key_matches

__all__ = ["AgentApiServer", "ApiReply", "CallHandler", "SampleEndpoint", "api_error"]

log = logging.getLogger(__name__)

ApiReply = tuple[int, dict[str, Any]]
CallHandler = Callable[[dict[str, Any]], Awaitable[ApiReply]]
_MB = 1024 * 1024
_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
}


def api_error(status: int, message: str, kind: str = "invalid_request_error") -> ApiReply:
    return status, {"error": {"message": message, "type": kind, "code": status}}


@dataclass(frozen=True, slots=True)
class SampleEndpoint:
    """What one registered sample's agent needs: its URL token and its API key."""

    token: str
    api_key: str


@dataclass(frozen=True, slots=True)
class _Registered:
    handler: CallHandler
    api_key: str


class AgentApiServer:
    """See the module docstring. `start()` it, `register` samples, `aclose()` it."""

    def __init__(
        self,
        model: str = "conductor",
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_body_mb: float = 8.0,
    ) -> None:
        self.model = model
        self._host = host
        self._port = port
        self._max_body_bytes = int(max_body_mb * _MB)
        self._samples: dict[str, _Registered] = {}
        self._runner: web.AppRunner | None = None
        self._bound_port = 0

    async def start(self) -> AgentApiServer:
        # aiohttp refuses a larger body itself (413) before reading it.
        app = web.Application(client_max_size=self._max_body_bytes, middlewares=[_json_errors])
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

    def register(self, handler: CallHandler) -> SampleEndpoint:
        """A new sample whose calls go to `handler`: its URL token and API key."""
        endpoint = SampleEndpoint(secrets.token_urlsafe(12), secrets.token_urlsafe(24))
        self._samples[endpoint.token] = _Registered(handler, endpoint.api_key)
        return endpoint

    def unregister(self, token: str) -> None:
        self._samples.pop(token, None)

    def base_url(self, token: str) -> str:
        if not self._bound_port:
            raise RuntimeError("start() the agent API server first")
        return f"http://{self._host}:{self._bound_port}/s/{token}/v1"

    async def _chat(self, request: web.Request) -> web.Response:
        sample = self._sample(request)
        if isinstance(sample, web.Response):
            return sample
        raw = await request.read()
        try:
            body = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return _reply(api_error(400, f"the body is not UTF-8: {exc}"))
        except json.JSONDecodeError as exc:
            return _reply(api_error(400, f"the body is not JSON: {exc}"))
        problem = chat_body_error(body)
        if problem is not None:
            return _reply(api_error(400, problem))
        return _reply(await sample.handler(body))

    async def _models(self, request: web.Request) -> web.Response:
        sample = self._sample(request)
        if isinstance(sample, web.Response):
            return sample
        model = {"id": self.model, "object": "model", "owned_by": "aio-conductor"}
        return _reply((200, {"object": "list", "data": [model]}))

    def _sample(self, request: web.Request) -> _Registered | web.Response:
        """The sample a call names, if the call carries its key; else the refusal."""
        sample = self._samples.get(request.match_info["token"])
        if sample is None:
            return _reply(api_error(404, "unknown or finished sample (its episode is over)"))
        presented = bearer_key(request.headers.get("Authorization"))
        if presented is None:
            return _reply(
                api_error(
                    401,
                    "no API key: send this sample's key as `Authorization: Bearer <key>` (the "
                    "OpenAI client's api_key; AgentContext.api_key)",
                    _ERROR_TYPES[401],
                )
            )
        if not key_matches(presented, sample.api_key):
            return _reply(
                api_error(
                    403,
                    "this API key is not this sample's: each sample's agent must use its own "
                    "base_url and api_key (AgentContext); the call was refused and no sample "
                    "was changed",
                    _ERROR_TYPES[403],
                )
            )
        return sample


@web.middleware
async def _json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every refusal as an OpenAI error object: aiohttp's own (unknown route, wrong method,
    body too large) and a handler's failure (logged in one line, answered 500)."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = _refusal_message(request, exc)
        kind = _ERROR_TYPES.get(exc.status, "invalid_request_error")
        return _reply(api_error(exc.status, message, kind))
    except Exception as exc:  # a session's bug: the agent gets an answer, the run goes on
        log.error("agent API call %s %s failed: %r", request.method, request.path, exc)
        return _reply(api_error(500, f"the call failed inside the conductor: {exc!r}", "api_error"))


def _refusal_message(request: web.Request, exc: web.HTTPException) -> str:
    if exc.status == 404:
        return (
            f"{request.path} is not served here: this endpoint serves POST "
            "/s/<token>/v1/chat/completions (non-streaming) and GET /s/<token>/v1/models"
        )
    if exc.status == 405:
        return f"{request.method} is not allowed on {request.path}"
    if exc.status == 413:
        return f"the body is too large ({exc.reason}); see agent_api.max_body_mb"
    return exc.reason or f"HTTP {exc.status}"


def _reply(reply: ApiReply) -> web.Response:
    status, payload = reply
    return web.json_response(payload, status=status)
