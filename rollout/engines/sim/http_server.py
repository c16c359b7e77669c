"""`SimSGLangServer`: the simulated engine behind SGLang 0.5.23's HTTP API (aiohttp).

So the SGLang client is tested over real HTTP, and SGLang's own HTTP test kits run against it,
without a GPU. It follows the wheel's `entrypoints/http_server.py` where a client or the kits
look: `/generate` (token ids or text; non-streaming, or one SSE chunk), `/abort_request` (by
rid *prefix*, or all), `/pause_generation` (abort, retract, in_place), `/continue_generation`,
`/flush_cache` (400 while requests run or wait), `/server_info` and `/get_server_info`,
`/model_info` and `/get_model_info`, `/health`, `/health_generate`, `/metrics` (the `sglang:*`
gauges), the weight-update endpoints (each installs a new policy version), `/v1/tokenize`,
`/v1/models` and minimal `/v1/completions` and `/v1/chat/completions`. One extension:
`POST /kv_hints {"kv_hints": envelope}` delivers session hints out of band (the server info
says so with `agentkv_kv_hints_endpoint: true`).

It paces itself in wall-clock time on the cost model, as the in-process engine does under
`conductor run`; what it generates is the engine's `TokenModel`'s business.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from aiohttp import web

from rollout.engines.base import (
    EngineError,
    GenerateRequest,
    GenerateResult,
    KVHint,
    SamplingParams,
)
from rollout.engines.sglang.wire import parse_kv_hints_envelope
from rollout.engines.sim.config import PauseMode
from rollout.engines.sim.engine import SimEngine

__all__ = ["RequestDeadlines", "ServedIdentity", "SimSGLangServer", "TextCodec", "generate_reply"]

SGLANG_VERSION = "0.5.23"  # the API this server follows
_PAUSE_MODES: tuple[PauseMode, ...] = ("abort", "retract", "in_place")
_DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's SamplingParams default


class TextCodec(Protocol):
    """Text <-> ids for text prompts and replies (the served model's tokenizer)."""

    @property
    def eos_token_id(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool) -> str: ...

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The chat template applied to OpenAI-style messages, with the assistant turn open."""
        ...


@dataclass(frozen=True, slots=True)
class ServedIdentity:
    """What the server says about itself in /server_info and /model_info."""

    model_path: str
    served_model_name: str = "default"
    max_context_tokens: int = 131072
    server_args: Mapping[str, Any] = field(default_factory=dict)  # more /server_info fields


@dataclass(frozen=True, slots=True)
class RequestDeadlines:
    """SGLang's `SGLANG_REQ_WAITING_TIMEOUT` / `SGLANG_REQ_RUNNING_TIMEOUT`: a request that
    waits (or runs) longer is aborted and answered 503. 0 = no limit (seconds)."""

    waiting_s: float = 0.0
    running_s: float = 0.0
    poll_s: float = 0.05


class _BadRequest(Exception):
    """A request SGLang would answer with 400; the message says what is wrong."""


class _DeadlinePassed(Exception):
    """A request waited or ran past its deadline; SGLang answers 503."""


class SimSGLangServer:
    """SGLang's HTTP API over `engine` (see the module docstring). One event loop owns both.

    Args:
        engine: the simulated engine (build it with `flush_cache_on_weight_update: false`:
            weight updates flush when their request says so, as SGLang does).
        codec: the served model's tokenizer, for text prompts and replies.
        identity: model name and extra server args to report.
    """

    def __init__(
        self,
        engine: SimEngine,
        codec: TextCodec,
        identity: ServedIdentity,
        deadlines: RequestDeadlines | None = None,
    ) -> None:
        self._engine = engine
        self._codec = codec
        self._identity = identity
        self._deadlines = deadlines or RequestDeadlines()
        self._version_names: dict[int, str] = {0: "default"}
        self._runner: web.AppRunner | None = None
        self._started_s = time.time()

    @property
    def engine(self) -> SimEngine:
        return self._engine

    # ---- lifetime ------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        route = app.router.add_route
        for method in ("POST", "PUT"):
            route(method, "/generate", self._generate)
        route("POST", "/abort_request", self._abort)
        route("POST", "/pause_generation", self._pause)
        route("POST", "/continue_generation", self._continue)
        for method in ("GET", "POST"):
            route(method, "/flush_cache", self._flush_cache)
        for path in ("/server_info", "/get_server_info"):
            route("GET", path, self._server_info)
        for path in ("/model_info", "/get_model_info"):
            route("GET", path, self._model_info)
        route("GET", "/health", self._health)
        route("GET", "/health_generate", self._health_generate)
        route("GET", "/metrics", self._metrics)
        for path in (
            "/update_weights_from_disk",
            "/update_weights_from_tensor",
            "/update_weights_from_distributed",
        ):
            route("POST", path, self._update_weights)
        route("POST", "/update_weight_version", self._update_weight_version)
        for path in ("/init_weights_update_group", "/destroy_weights_update_group"):
            route("POST", path, self._weights_group)
        for path in ("/v1/tokenize", "/tokenize"):
            route("POST", path, self._tokenize)
        route("GET", "/v1/models", self._models)
        route("POST", "/v1/completions", self._completions)
        route("POST", "/v1/chat/completions", self._chat_completions)
        route("POST", "/kv_hints", self._kv_hints)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Serve on `host:port` (0: a free port); returns the bound port."""
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        return int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # ---- generation ----------------------------------------------------------------------------

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await _json_body(request)
            generate = self._to_request(body)
        except _BadRequest as exc:
            return _error(400, str(exc))
        if generate.rid in self._engine.live_rids():
            return _error(400, f"Duplicate request ID: {generate.rid}")
        try:
            result = await self._generate_within_deadlines(generate)
        except EngineError as exc:
            return _error(500, str(exc))
        except _DeadlinePassed as exc:
            return _json_response(
                {"object": "error", "message": str(exc), "type": "ServiceUnavailable",
                 "param": None, "code": 503},
                status=503,
            )  # fmt: skip
        params = body.get("sampling_params") or {}
        reply = generate_reply(
            result,
            text=self._codec.decode(
                result.output_ids,
                skip_special_tokens=bool(params.get("skip_special_tokens", True)),
            ),
            return_logprob=bool(body.get("return_logprob", False)),
            version_name=self._version_name,
        )
        if not body.get("stream", False):
            return _json_response(reply)
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        await stream.write(b"data: " + orjson.dumps(reply) + b"\n\n")
        await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream

    async def _generate_within_deadlines(self, generate: GenerateRequest) -> GenerateResult:
        deadlines = self._deadlines
        if not deadlines.waiting_s and not deadlines.running_s:
            return await self._engine.generate(generate)
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(self._engine.generate(generate))
        arrived_s = loop.time()
        running_since_s: float | None = None
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=deadlines.poll_s)
                if done:
                    return task.result()
                now_s = loop.time()
                waiting = self._engine.is_waiting(generate.rid)
                if waiting is False and running_since_s is None:
                    running_since_s = now_s
                late = (
                    waiting and deadlines.waiting_s and now_s - arrived_s > deadlines.waiting_s
                ) or (
                    running_since_s is not None
                    and deadlines.running_s
                    and now_s - running_since_s > deadlines.running_s
                )
                if late:
                    await self._engine.abort(generate.rid)
                    await task
                    what = "waiting" if waiting else "running"
                    raise _DeadlinePassed(f"request {generate.rid} timed out while {what}")
        finally:
            if not task.done():
                task.cancel()

    def _to_request(self, body: Mapping[str, Any]) -> GenerateRequest:
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise _BadRequest("sampling_params must be an object")
        ids = body.get("input_ids")
        text = body.get("text")
        if (ids is None) == (text is None):
            raise _BadRequest("give exactly one of input_ids and text")
        if text is not None:
            if not isinstance(text, str):
                raise _BadRequest("batched text prompts are not supported by serve-sim")
            ids = self._codec.encode(text)
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            raise _BadRequest("input_ids must be a non-empty list of token ids (one prompt)")
        max_new = params.get("max_new_tokens", _DEFAULT_MAX_NEW_TOKENS)
        if not isinstance(max_new, int) or max_new < 0:
            raise _BadRequest(f"max_new_tokens must be a non-negative integer, got {max_new!r}")
        stops = tuple(params.get("stop_token_ids") or ())
        if params.get("ignore_eos", False):
            stops = ()
        elif not stops:
            stops = (self._codec.eos_token_id,)
        rid = body.get("rid") or uuid.uuid4().hex
        if not isinstance(rid, str):
            raise _BadRequest("rid must be a string (batched requests are not supported)")
        hints: tuple[KVHint, ...] = ()
        if body.get("kv_hints") is not None:
            try:
                hints = parse_kv_hints_envelope(body["kv_hints"])
            except ValueError as exc:
                raise _BadRequest(str(exc)) from None
        priority = body.get("priority")
        keys = [body.get("cache_salt"), body.get("extra_key")]
        if not all(key is None or isinstance(key, str) for key in keys):
            raise _BadRequest("cache_salt and extra_key must be strings")
        # Either key (or both, as a pair) namespaces the prefix cache, as in SGLang.
        namespace = "\x1f".join(key or "" for key in keys) if any(keys) else ""
        return GenerateRequest(
            rid=rid,
            input_ids=tuple(ids),
            sampling=SamplingParams(
                max_new_tokens=max(1, max_new),
                temperature=float(params.get("temperature", 1.0)),
                top_p=float(params.get("top_p", 1.0)),
                stop_token_ids=stops,
            ),
            session_id=str(body.get("session_id") or ""),
            priority=int(priority) if priority is not None else 0,
            kv_hints=hints,
            cache_namespace=namespace,
        )

    async def _abort(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        prefix = str(body.get("rid") or "")
        abort_all = bool(body.get("abort_all", False))
        for rid in self._engine.live_rids():  # SGLang matches by prefix
            if abort_all or (prefix and rid.startswith(prefix)):
                await self._engine.abort(rid)
        return web.Response(status=200)

    async def _pause(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        mode = body.get("mode", "abort")
        if mode not in _PAUSE_MODES:
            return _error(400, f"mode must be one of {', '.join(_PAUSE_MODES)}, got {mode!r}")
        await self._engine.pause_generation(mode)
        return web.json_response({"message": "Generation paused successfully.", "status": "ok"})

    async def _continue(self, request: web.Request) -> web.Response:
        await self._engine.resume()
        return web.json_response({"message": "Generation continued successfully.", "status": "ok"})

    async def _flush_cache(self, request: web.Request) -> web.Response:
        if self._engine.flush_cache():
            return web.Response(text="Cache flushed.\n")
        return web.Response(
            status=400,
            text="Cache not flushed because there are pending requests. "
            f"#queue-req: {self._engine.stats().waiting_requests}, "
            f"#running-req: {self._engine.stats().running_requests}\n",
        )

    # ---- weights -------------------------------------------------------------------------------

    async def _update_weights(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        version = await self._install(
            body.get("weight_version"), flush=body.get("flush_cache", True)
        )
        return web.json_response(
            {"success": True, "message": f"weights of version {version} installed",
             "num_paused_requests": 0}
        )  # fmt: skip

    async def _update_weight_version(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        if "new_version" not in body:
            return _error(400, "new_version is required")
        if body.get("abort_all_requests", True):
            for rid in self._engine.live_rids():
                await self._engine.abort(rid)
        name = str(body["new_version"])
        await self._install(name, flush=False)
        return web.json_response(
            {"success": True, "message": f"Weight version updated to {name}", "new_version": name}
        )

    async def _weights_group(self, request: web.Request) -> web.Response:
        await _json_body(request)
        return web.json_response({"success": True, "message": "ok (simulated group)"})

    async def _install(self, name: object, *, flush: object) -> str:
        """Install the next policy version, called `name` (default: its number)."""
        number = self._engine.stats().weight_version + 1
        label = str(number) if name is None else str(name)
        if label.isdigit() and int(label) > self._engine.stats().weight_version:
            number = int(label)
        self._version_names[number] = label
        await self._engine.update_weights(number)
        if flush:
            self._engine.flush_cache()  # refused (a no-op) while requests are kept in place
        return label

    def _version_name(self, number: int) -> str:
        return self._version_names.get(number, str(number))

    # ---- status --------------------------------------------------------------------------------

    async def _server_info(self, request: web.Request) -> web.Response:
        stats = self._engine.stats()
        config = self._engine.config
        info = {
            "model_path": self._identity.model_path,
            "served_model_name": self._identity.served_model_name,
            "page_size": config.page_tokens,
            "max_running_requests": config.max_running_requests,
            "chunked_prefill_size": config.chunked_prefill_tokens,
            "schedule_policy": "fcfs",
            "enable_priority_scheduling": str(config.schedule_policy) == "priority",
            "disable_radix_cache": False,
            "radix_cache_backend": str(config.kv_backend),
            "context_length": self._identity.max_context_tokens,
            **self._identity.server_args,
            "internal_states": [
                {
                    "memory_usage": {"token_capacity": stats.kv_capacity_tokens},
                    "effective_max_running_requests_per_dp": stats.max_running_requests,
                    "engine_paused": self._engine.paused,
                    "waiting_queue_size": stats.waiting_requests,
                    "running_batch_size": stats.running_requests,
                }
            ],
            "version": f"{SGLANG_VERSION}+sim",
            "startup_time": self._started_s,
            "agentkv_kv_hints_endpoint": True,
        }
        return web.json_response(info)

    async def _model_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "model_path": self._identity.model_path,
                "served_model_name": self._identity.served_model_name,
                "tokenizer_path": self._identity.model_path,
                "is_generation": True,
                "weight_version": self._version_name(self._engine.stats().weight_version),
                "model_type": "simulated",
            }
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _health_generate(self, request: web.Request) -> web.Response:
        """One-token generation, as SGLang's check does (skipped while the server is busy)."""
        stats = self._engine.stats()
        if stats.running_requests or stats.waiting_requests or self._engine.paused:
            return web.Response(status=200)
        probe = GenerateRequest(
            rid=f"HEALTH_CHECK_{uuid.uuid4().hex}",
            input_ids=(self._codec.eos_token_id,),
            sampling=SamplingParams(max_new_tokens=1, temperature=0.0),
        )
        try:
            await asyncio.wait_for(self._engine.generate(probe), timeout=20)
        except (EngineError, TimeoutError):
            return web.Response(status=503)
        return web.Response(status=200)

    async def _metrics(self, request: web.Request) -> web.Response:
        stats = self._engine.stats()
        extra = stats.extra
        capacity = max(1, stats.kv_capacity_tokens)
        cached = extra.get("cached_tokens", 0.0)
        prompt = cached + extra.get("prefill_tokens", 0.0)  # served from cache + computed
        gauges = {
            "sglang:num_running_reqs": stats.running_requests,
            "sglang:num_queue_reqs": stats.waiting_requests,
            "sglang:token_usage": stats.kv_used_tokens / capacity,
            "sglang:kv_used_tokens": stats.kv_used_tokens,
            "sglang:kv_available_tokens": stats.kv_capacity_tokens - stats.kv_used_tokens,
            "sglang:kv_evictable_tokens": extra.get("kv_evictable_tokens", 0.0),
            "sglang:cache_hit_rate": cached / prompt if prompt else 0.0,
            "sglang:num_retracted_reqs": extra.get("retractions", 0.0),
        }
        labels = f'{{model_name="{self._identity.served_model_name}"}}'
        lines = []
        for name, value in gauges.items():
            lines += [f"# TYPE {name} gauge", f"{name}{labels} {float(value)}"]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def _kv_hints(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        try:
            hints = parse_kv_hints_envelope(body.get("kv_hints"))
        except ValueError as exc:
            return _error(400, str(exc))
        await self._engine.send_kv_hints(hints)
        return web.json_response({"success": True, "hints": len(hints)})

    # ---- OpenAI-compatible ---------------------------------------------------------------------

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return _error(400, "prompt must be a string")
        tokens = self._codec.encode(prompt)
        return web.json_response(
            {
                "tokens": tokens,
                "count": len(tokens),
                "max_model_len": self._identity.max_context_tokens,
            }
        )

    async def _models(self, request: web.Request) -> web.Response:
        name = self._identity.served_model_name
        return web.json_response(
            {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "sglang"}]}
        )

    async def _completions(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return _error(400, "prompt must be a string (batched prompts are not supported)")
        result, text = await self._openai_generate(self._codec.encode(prompt), body)
        choice = {"index": 0, "text": text, "logprobs": None,
                  "finish_reason": _openai_finish(result)}  # fmt: skip
        return web.json_response(self._openai_reply("text_completion", choice, result))

    async def _chat_completions(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "messages must be a non-empty list")
        ids = self._codec.encode(self._codec.chat_prompt(messages))
        result, text = await self._openai_generate(ids, body)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": _openai_finish(result),
        }
        return web.json_response(self._openai_reply("chat.completion", choice, result))

    async def _openai_generate(
        self, ids: list[int], body: Mapping[str, Any]
    ) -> tuple[GenerateResult, str]:
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 128
        request = GenerateRequest(
            rid=str(body.get("rid") or uuid.uuid4().hex),
            input_ids=tuple(ids),
            sampling=SamplingParams(
                max_new_tokens=int(max_tokens),
                temperature=float(body.get("temperature", 1.0)),
                top_p=float(body.get("top_p", 1.0)),
                stop_token_ids=(self._codec.eos_token_id,),
            ),
            session_id=str(body.get("session_id") or ""),
            priority=int(body.get("priority") or 0),
        )
        result = await self._engine.generate(request)
        text = self._codec.decode(result.output_ids, skip_special_tokens=True)
        return result, text

    def _openai_reply(
        self, kind: str, choice: dict[str, Any], result: GenerateResult
    ) -> dict[str, Any]:
        completion = len(result.output_ids)
        return {
            "id": result.rid,
            "object": kind,
            "created": int(time.time()),
            "model": self._identity.served_model_name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": result.prompt_tokens + completion,
            },
        }


def generate_reply(
    result: GenerateResult, *, text: str, return_logprob: bool, version_name: Any
) -> dict[str, Any]:
    """The /generate reply SGLang 0.5.23 sends for `result` (see `rollout.engines.sglang.wire`).

    `version_name` maps policy versions to the server's weight-version strings."""
    finish: dict[str, Any] = {"type": str(result.finish_reason)}
    if finish["type"] == "length":
        finish["length"] = len(result.output_ids)
    elif finish["type"] == "abort":
        finish.update(message="Aborted", status_code=None, err_type=None)
    elif result.output_ids:
        finish["matched"] = result.output_ids[-1]
    meta: dict[str, Any] = {
        "id": result.rid,
        "finish_reason": finish,
        "prompt_tokens": result.prompt_tokens,
        "weight_version": version_name(result.weight_version),
        "num_retractions": result.num_retractions,
        "completion_tokens": len(result.output_ids),
        "cached_tokens": result.cached_tokens,
        "queue_time": result.queued_s,
    }
    if return_logprob:
        meta["output_token_logprobs"] = [
            [logprob, token, None]
            for logprob, token in zip(result.output_logprobs, result.output_ids, strict=True)
        ]
        meta["input_token_logprobs"] = []
    if result.output_versions:
        spans: list[dict[str, Any]] = []
        for index, version in enumerate(result.output_versions):
            if spans and spans[-1]["version"] == version_name(version):
                spans[-1]["end"] = index + 1
            else:
                spans.append({"version": version_name(version), "start": index, "end": index + 1})
        meta["weight_versions"] = spans
    return {"text": text, "output_ids": list(result.output_ids), "meta_info": meta}


def _openai_finish(result: GenerateResult) -> str:
    return "length" if str(result.finish_reason) == "length" else "stop"


async def _json_body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise web.HTTPBadRequest(
            body=orjson.dumps({"error": {"message": f"the body is not JSON: {exc}"}}),
            content_type="application/json",
        ) from exc
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            body=orjson.dumps({"error": {"message": "the body must be a JSON object"}}),
            content_type="application/json",
        )
    return body


def _json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message}}, status=status)
