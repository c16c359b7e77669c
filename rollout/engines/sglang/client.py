"""`SGLangEngine`: the rollout layer's `Engine` over SGLang servers, through their HTTP API.

Policy lives here, I/O in `transport`, shapes in `wire`, routing in `routing`:

* **Generation** is token-in/token-out `/generate` (exact ids and behaviour logprobs). A
  transport error or a 5xx answer is retried with bounded exponential backoff under a *new*
  wire rid after the old one is aborted, so a turn starts over and is never duplicated; a
  4xx answer is the caller's bug and raises at once. An `abort(rid)` between attempts ends
  the call with an empty `ABORT` result, as an abort of a queued request does in SGLang.
* **Several servers** share one logical engine: sessions stick to the server that holds their
  prefix cache, spilling to a clearly less loaded one (`routing.StickyRouter`). With
  `router: true` the one URL is an sglang-router that routes itself.
* **Load** comes from a background poll of `/metrics` (and the client's own count of requests
  in flight), so `stats()` never makes an HTTP call: the scheduler's decision path stays local.
  The same poll gives the engine's busy time (`extra["busy_s"]`): the time between two polls
  that saw `sglang:num_running_reqs` above 0, averaged over the servers; a server without
  `/metrics` leaves it unknown (no `busy_s`).
* **Weights**: `update_weights(version)` runs the weight load staged for that version (from
  disk, tensors or a distributed group; `stage_weights`), tags the server with the version and
  flushes the prefix cache. `pause` and `resume` are `/pause_generation` (mode per config) and
  `/continue_generation`.
* **Start-up** (`start`) fails with a message that says what to change when a server is
  unreachable, lacks priority scheduling, has its radix cache disabled, or tokenizes
  differently from the rollout's tokenizer.
* **Liveness** (`liveness`): each /generate attempt is bounded by what its request can take;
  every endpoint is probed in the background; one that stops answering is declared down
  (a rate-limited warning), and its requests move to another endpoint that answers (an
  attempt in flight there is given up and retried elsewhere); with none left, calls wait
  for one to come back, and after `outage_s` raise `EngineGoneError`, which ends the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rollout.engines.base import (
    Engine,
    EngineError,
    EngineGoneError,
    EngineStats,
    FinishReason,
    GenerateRequest,
    GenerateResult,
    KVHint,
    KVHintKind,
)
from rollout.engines.sglang.config import SGLangEngineConfig
from rollout.engines.sglang.liveness import (
    EndpointHealth,
    engine_gone,
    generate_timeout_s,
    outage_s,
    probe_endpoint,
)
from rollout.engines.sglang.routing import EndpointLoad, StickyRouter
from rollout.engines.sglang.transport import EngineTransportError, HTTPReply, HTTPTransport
from rollout.engines.sglang.wire import (
    EngineProtocolError,
    ServerInfo,
    ServerLoad,
    generate_body,
    kv_hints_envelope,
    parse_generate,
    parse_metrics,
    parse_server_info,
)

__all__ = [
    "TOKENIZER_PROBE",
    "EngineProtocolError",
    "EngineStartupError",
    "SGLangEngine",
    "WeightLoad",
    "backoff_delays",
    "connect_sglang_engines",
]

log = logging.getLogger(__name__)

WeightLoad = Callable[["SGLangEngine"], Awaitable[None]]
"""Loads new weights into the servers (e.g. `engine.update_weights_from_disk(path)`)."""

TOKENIZER_PROBE = "def main():\n    print('Hello, world! 123')  # ünïcode ✓\n"
"""Text tokenized by both sides at start-up: equal ids mean the same vocabulary and merges."""


class EngineStartupError(EngineError):
    """A server cannot serve this rollout as configured; the message says what to change."""


def backoff_delays(config: SGLangEngineConfig) -> Iterator[float]:
    """Waits before retries 1, 2, ...: exponential from `backoff_initial_s`, capped."""
    delay = config.backoff_initial_s
    while True:
        yield min(delay, config.backoff_max_s)
        delay *= config.backoff_multiplier


@dataclass(slots=True)
class _Endpoint:
    url: str
    info: ServerInfo
    load: ServerLoad = field(default_factory=ServerLoad)
    in_flight: int = 0
    metrics: bool = True  # the server serves /metrics (started with --enable-metrics)
    busy_s: float = 0.0  # time between polls that saw a running request (event-loop seconds)
    polled_at: float | None = None  # event-loop time of the last /metrics read


@dataclass(slots=True)
class _Call:
    """A /generate of ours in flight: where it runs, under which wire rid."""

    endpoint: int
    wire_rid: str
    abort_requested: bool = False


class SGLangEngine:
    """An `Engine` over SGLang servers; see the module docstring. Use `connect`, or `start`.

    Args:
        config: endpoints, timeouts, retries, pause mode, start-up checks.
        transport: the HTTP layer (tests may pass their own).
    """

    def __init__(
        self, config: SGLangEngineConfig, *, transport: HTTPTransport | None = None
    ) -> None:
        if config.router and len(config.endpoints) != 1:
            raise EngineStartupError(
                f"router: true needs exactly one endpoint (the router's URL), got "
                f"{len(config.endpoints)}"
            )
        self.name = config.name
        self._config = config
        self._transport = transport or HTTPTransport(connect_timeout_s=config.connect_timeout_s)
        self._endpoints: list[_Endpoint] = []
        self._router = StickyRouter(len(config.endpoints), spill_margin=config.spill_margin)
        self._calls: dict[str, _Call] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._retry_ids = itertools.count(1)
        self._version = 0
        self._versions: dict[str, int] = {"0": 0}
        self._staged: dict[int, WeightLoad] = {}
        self._pending_hints: dict[str, list[KVHint]] = {}
        self._hint_ids = itertools.count()
        self._hints_to_endpoint = False
        self._poller: asyncio.Task[None] | None = None
        self._aborting_pause = False  # an abort-mode pause holds: nothing new may start
        self._closed = False
        self._health = [EndpointHealth(url) for url in config.endpoints]
        self._abandon = [asyncio.Event() for _ in config.endpoints]  # give up attempts there
        self._answer = asyncio.Event()  # set whenever an endpoint that was failing answers
        self._gone: EngineGoneError | None = None
        self._monitor: asyncio.Task[None] | None = None

    @property
    def transport(self) -> HTTPTransport:
        """The HTTP layer (its `calls` count every request made)."""
        return self._transport

    @classmethod
    async def connect(
        cls,
        config: SGLangEngineConfig,
        *,
        encode: Callable[[str], Sequence[int]] | None = None,
        transport: HTTPTransport | None = None,
    ) -> SGLangEngine:
        """A started engine (see `start`)."""
        engine = cls(config, transport=transport)
        try:
            await engine.start(encode=encode)
        except BaseException:
            await engine.aclose()
            raise
        return engine

    async def start(self, *, encode: Callable[[str], Sequence[int]] | None = None) -> None:
        """Check every server, read its capacity, start the background poll.

        `encode`: the rollout tokenizer's text -> ids; when given, each server must tokenize
        `TOKENIZER_PROBE` to the same ids (else the trajectories would not be the model's).
        """
        if self._endpoints:
            raise EngineError(f"engine {self.name!r} was started already")
        for url in self._config.endpoints:
            info = await self._server_info(url)
            self._check_server(url, info)
            if encode is not None:
                await self._check_tokenizer(url, encode)
            self._endpoints.append(_Endpoint(url, info))
        if self._config.kv_hints == "endpoint":
            self._hints_to_endpoint = True
        elif self._config.kv_hints == "auto":
            self._hints_to_endpoint = all(e.info.kv_hints_endpoint for e in self._endpoints)
        await self._poll_once()
        loop = asyncio.get_running_loop()
        self._poller = loop.create_task(self._poll_forever(), name=f"{self.name}-stats-poll")
        self._monitor = loop.create_task(self._monitor_forever(), name=f"{self.name}-liveness")

    # ---- Engine protocol --------------------------------------------------------------------

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        """One turn; see the module docstring for retries and aborts."""
        self._check_started()
        if request.rid in self._calls:
            raise EngineError(f"rid {request.rid!r} is already in flight; rids must be unique")
        if self._aborting_pause:
            return _aborted(request)  # as SGLang aborts what arrives during an abort pause
        loop = asyncio.get_running_loop()
        if request.deadline_s is not None and loop.time() >= request.deadline_s:
            return _aborted(request)  # too late to help: not sent at all
        await self._until_serving()  # no endpoint answers: wait (or the engine is gone)
        hints = (*self._pending_hints.pop(request.session_id, ()), *request.kv_hints)
        endpoint = self._route(request.session_id)
        call = _Call(endpoint, request.rid)
        self._calls[request.rid] = call
        self._idle.clear()
        self._endpoints[endpoint].in_flight += 1
        expiry = None
        if request.deadline_s is not None:  # /abort_request then: SGLang answers the partial output
            expiry = loop.create_task(
                self._abort_at(request.rid, request.deadline_s), name=f"deadline-{request.rid}"
            )
        try:
            return await self._generate_with_retries(request, call, hints)
        finally:
            if expiry is not None:
                expiry.cancel()
            self._endpoints[call.endpoint].in_flight -= 1
            del self._calls[request.rid]
            if not self._calls:
                self._idle.set()

    async def _abort_at(self, rid: str, deadline_s: float) -> None:
        """Abort `rid` when its deadline passes (it returns with its output so far)."""
        await asyncio.sleep(max(0.0, deadline_s - asyncio.get_running_loop().time()))
        await self.abort(rid)

    async def abort(self, rid: str) -> None:
        call = self._calls.get(rid)
        if call is None:
            return
        call.abort_requested = True
        await self._abort_wire(call.endpoint, call.wire_rid)

    async def abort_all(self) -> None:
        """Abort every request on every server (`/abort_request {"abort_all": true}`)."""
        for call in self._calls.values():
            call.abort_requested = True
        await self._each_endpoint("/abort_request", {"abort_all": True})

    async def send_kv_hints(self, hints: Sequence[KVHint]) -> None:
        if self._config.kv_hints == "off" or not hints:
            return
        if not self._hints_to_endpoint:
            for hint in hints:  # delivered with the session's next /generate
                if hint.kind is KVHintKind.CLOSE:
                    self._pending_hints.pop(hint.session_id, None)
                    self._router.forget(hint.session_id)
                else:
                    self._pending_hints.setdefault(hint.session_id, []).append(hint)
            return
        by_endpoint: dict[int, list[KVHint]] = {}
        for hint in hints:
            home = self._router.home_of(hint.session_id)
            targets = range(len(self._endpoints)) if home is None else (home,)
            for index in targets:
                by_endpoint.setdefault(index, []).append(hint)
            if hint.kind is KVHintKind.CLOSE:
                self._router.forget(hint.session_id)
        for index, group in by_endpoint.items():
            envelope = kv_hints_envelope(group, message_id=f"hints-{next(self._hint_ids)}")
            try:
                await self._control(index, "/kv_hints", {"kv_hints": envelope})
            except EngineError as exc:  # a lost hint costs speed, never a sample
                log.warning("KV hints to %s were not delivered: %s", self._url(index), exc)

    async def pause(self) -> None:
        """`/pause_generation` on every server; in abort mode, wait for our calls to return."""
        self._check_started()
        await self._until_serving()
        self._aborting_pause = self._config.pause_mode == "abort"
        await self._each_endpoint("/pause_generation", {"mode": self._config.pause_mode})
        if self._config.pause_mode == "abort":
            try:
                await asyncio.wait_for(self._idle.wait(), self._config.control_timeout_s)
            except TimeoutError:
                raise EngineError(
                    f"engine {self.name!r}: {len(self._calls)} requests had not come back "
                    f"{self._config.control_timeout_s:g} s after /pause_generation (abort)"
                ) from None

    async def resume(self) -> None:
        self._check_started()
        await self._until_serving()
        await self._each_endpoint("/continue_generation", {})
        self._aborting_pause = False

    async def update_weights(self, version: int, *, flush_cache: bool = True) -> None:
        """Load the weights staged for `version` (if any), tag every server with it, flush
        (unless `flush_cache` is False or the config turns flushing off)."""
        self._check_started()
        await self._until_serving()
        load = self._staged.pop(version, None)
        if load is not None:
            await load(self)
        tag = str(version)
        self._versions[tag] = version
        await self._each_endpoint(
            "/update_weight_version",
            {"new_version": tag, "abort_all_requests": False},
            timeout_s=self._config.weight_update_timeout_s,
        )
        self._version = version
        flush = flush_cache and self._config.flush_cache_on_weight_update
        if flush and self._config.pause_mode != "in_place":
            await self.flush_cache()

    def stats(self) -> EngineStats:
        """The latest polled load, with the client's own in-flight count; no HTTP call."""
        running = waiting = used = capacity = slots = evictable = 0
        for endpoint in self._endpoints:
            info, load = endpoint.info, endpoint.load
            slots += info.max_running_requests
            capacity += info.max_total_tokens
            if load.running_requests is not None and load.queued_requests is not None:
                server_running, server_waiting = load.running_requests, load.queued_requests
            else:
                server_running = min(endpoint.in_flight, info.max_running_requests)
                server_waiting = endpoint.in_flight - server_running
            running += server_running
            waiting += server_waiting
            if load.used_tokens is not None:
                used += load.used_tokens
            elif load.token_usage is not None:
                used += round(load.token_usage * info.max_total_tokens)
            evictable += load.evictable_tokens or 0
        extra = {"kv_evictable_tokens": float(evictable), "in_flight": float(len(self._calls))}
        if self._endpoints and all(endpoint.metrics for endpoint in self._endpoints):
            busy = sum(endpoint.busy_s for endpoint in self._endpoints)
            extra["busy_s"] = busy / len(self._endpoints)
        return EngineStats(
            running_requests=running,
            waiting_requests=waiting,
            max_running_requests=slots,
            kv_used_tokens=used,
            kv_capacity_tokens=capacity,
            weight_version=self._version,
            extra=extra,
        )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        background = [task for task in (self._poller, self._monitor) if task is not None]
        self._poller = self._monitor = None
        for task in background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._transport.aclose()

    async def __aenter__(self) -> SGLangEngine:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ---- weights, cache: pass-throughs for trainers --------------------------------------------

    def stage_weights(self, version: int, load: WeightLoad) -> None:
        """Run `load(self)` inside `update_weights(version)`, between pause and resume."""
        self._staged[version] = load

    async def update_weights_from_disk(self, model_path: str, **options: Any) -> None:
        """`/update_weights_from_disk` on every server (options: load_format, ...)."""
        await self._weights_call("/update_weights_from_disk", {"model_path": model_path, **options})

    async def update_weights_from_tensor(
        self, serialized_named_tensors: Sequence[str], **options: Any
    ) -> None:
        """`/update_weights_from_tensor`: base64 `MultiprocessingSerializer` payloads."""
        body = {"serialized_named_tensors": list(serialized_named_tensors), **options}
        await self._weights_call("/update_weights_from_tensor", body)

    async def init_weights_update_group(self, **group: Any) -> None:
        """`/init_weights_update_group` (master_address, master_port, rank_offset, world_size,
        group_name, backend) on every server."""
        await self._weights_call("/init_weights_update_group", group)

    async def update_weights_from_distributed(
        self, names: Sequence[str], dtypes: Sequence[str], shapes: Sequence[Sequence[int]],
        group_name: str, **options: Any,
    ) -> None:  # fmt: skip
        """`/update_weights_from_distributed`: the trainer broadcasts while this call runs."""
        body = {
            "names": list(names),
            "dtypes": list(dtypes),
            "shapes": [list(shape) for shape in shapes],
            "group_name": group_name,
            **options,
        }
        await self._weights_call("/update_weights_from_distributed", body)

    async def destroy_weights_update_group(self, group_name: str) -> None:
        await self._weights_call("/destroy_weights_update_group", {"group_name": group_name})

    async def flush_cache(self) -> None:
        """`/flush_cache` on every server (SGLang refuses while requests run: an error here)."""
        await self._each_endpoint("/flush_cache", None)

    # ---- internals ----------------------------------------------------------------------------

    async def _generate_with_retries(
        self, request: GenerateRequest, call: _Call, hints: Sequence[KVHint]
    ) -> GenerateResult:
        delays = backoff_delays(self._config)
        timeout_s = generate_timeout_s(request.sampling.max_new_tokens, self._config)
        for attempt in range(1, self._config.max_attempts + 1):
            body = generate_body(request, wire_rid=call.wire_rid, hints=hints)
            index = call.endpoint
            url = self._url(index) + "/generate"
            try:
                reply = await self._attempt(index, url, body, timeout_s)
            except EngineTransportError as exc:
                failure: str = str(exc)
            else:
                if reply.ok:
                    return parse_generate(
                        reply.json(),
                        rid=request.rid,
                        prompt_tokens=len(request.input_ids),
                        version_of=self._versions,
                    )
                if reply.status < 500:
                    raise EngineError(
                        f"engine {self.name!r} rejected request {request.rid} "
                        f"({reply.status}): {reply.error_message()}"
                    )
                failure = f"{url} answered {reply.status}: {reply.error_message()}"
            if self._gone is not None:
                raise self._gone
            if attempt == self._config.max_attempts:
                raise EngineError(
                    f"engine {self.name!r}: request {request.rid} failed {attempt} times; "
                    f"last: {failure}"
                )
            log.warning(
                "request %s attempt %d failed (%s); retrying", request.rid, attempt, failure
            )
            await self._abort_wire(index, call.wire_rid)  # it may still run there
            await asyncio.sleep(next(delays))
            if call.abort_requested or self._aborting_pause:
                return _aborted(request)  # as a request aborted in the waiting queue
            self._move(call, await self._endpoint_after_failure(index), request.session_id)
            call.wire_rid = f"r{next(self._retry_ids)}-{request.rid}"  # never a prefix of another
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(
        self, index: int, url: str, body: dict[str, Any], timeout_s: float
    ) -> HTTPReply:
        """One /generate on endpoint `index`, given up early when that endpoint is declared
        down while another answers (the retry goes there) or the engine is gone."""
        sent = asyncio.ensure_future(
            self._request(index, "POST", url, json_body=body, timeout_s=timeout_s)
        )
        abandon = asyncio.ensure_future(self._abandon[index].wait())
        try:
            await asyncio.wait({sent, abandon}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            abandon.cancel()
            if not sent.done():
                sent.cancel()
                with contextlib.suppress(asyncio.CancelledError, EngineTransportError):
                    await sent
        if not sent.cancelled():
            return sent.result()
        if self._gone is not None:
            raise self._gone
        health = self._health[index]
        raise EngineTransportError(
            f"{url} stopped answering ({health.last_error or 'no answer'}); moved to another "
            "endpoint"
        )

    async def _endpoint_after_failure(self, failed: int) -> int:
        """Where a failed attempt is retried: another endpoint that answers, if there is one
        (least loaded); else the failed one once any endpoint answers again."""
        if not self._config.router:
            others = [
                index
                for index, health in enumerate(self._health)
                if index != failed and health.failing_since_s is None
            ]
            if others:
                return min(others, key=lambda index: (self._endpoints[index].in_flight, index))
        await self._until_serving()
        serving = [i for i, health in enumerate(self._health) if health.failing_since_s is None]
        return failed if failed in serving or not serving else serving[0]

    def _move(self, call: _Call, index: int, session_id: str) -> None:
        if index == call.endpoint:
            return
        self._endpoints[call.endpoint].in_flight -= 1
        self._endpoints[index].in_flight += 1
        call.endpoint = index
        if session_id:
            self._router.move(session_id, index)

    async def _abort_wire(self, index: int, wire_rid: str) -> None:
        try:
            if self._health[index].failing_since_s is not None:  # one quick try, not four
                await self._control(
                    index,
                    "/abort_request",
                    {"rid": wire_rid},
                    timeout_s=self._config.probe_timeout_s,
                    attempts=1,
                )
            else:
                await self._control(index, "/abort_request", {"rid": wire_rid})
        except EngineError as exc:  # best effort: the server may be the one that failed
            log.warning("abort of %s on %s failed: %s", wire_rid, self._url(index), exc)

    def _route(self, session_id: str) -> int:
        if self._config.router or len(self._endpoints) == 1:
            return 0
        loads = [
            EndpointLoad(
                endpoint.in_flight,
                0 if health.down else endpoint.info.max_running_requests,  # down: never least
            )
            for endpoint, health in zip(self._endpoints, self._health, strict=True)
        ]
        return self._router.route(session_id, loads)

    async def _weights_call(self, path: str, body: dict[str, Any]) -> None:
        # Our own step (update_weights) tags the version and flushes once, after the load.
        body = {"flush_cache": False, "abort_all_requests": False, **body}
        await self._each_endpoint(path, body, timeout_s=self._config.weight_update_timeout_s)

    async def _each_endpoint(
        self, path: str, body: dict[str, Any] | None, *, timeout_s: float | None = None
    ) -> None:
        await asyncio.gather(
            *(self._control(i, path, body, timeout_s=timeout_s) for i in range(len(self._urls())))
        )

    async def _control(
        self,
        index: int,
        path: str,
        body: dict[str, Any] | None,
        *,
        timeout_s: float | None = None,
        attempts: int | None = None,
    ) -> HTTPReply:
        """A control call with retries on transport errors and 5xx; an error if it fails."""
        url = self._urls()[index] + path
        delays = backoff_delays(self._config)
        tries = attempts or self._config.max_attempts
        for attempt in range(1, tries + 1):
            try:
                reply = await self._request(
                    index,
                    "POST",
                    url,
                    json_body=body if body is not None else {},
                    timeout_s=timeout_s or self._config.control_timeout_s,
                )
            except EngineTransportError as exc:
                failure = str(exc)
            else:
                if reply.ok:
                    return reply
                if reply.status < 500:
                    raise EngineError(f"{url} refused ({reply.status}): {reply.error_message()}")
                failure = f"{url} answered {reply.status}: {reply.error_message()}"
            if self._gone is not None:
                raise self._gone
            if attempt == tries:
                raise EngineError(f"{url} failed {attempt} times; last: {failure}")
            await asyncio.sleep(next(delays))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _request(
        self, index: int, method: str, url: str, *, json_body: Any = None, timeout_s: float
    ) -> HTTPReply:
        """One call to endpoint `index` through the transport; an answer or a call that got
        none is counted in the endpoint's health."""
        try:
            reply = await self._transport.request(
                method, url, json_body=json_body, timeout_s=timeout_s
            )
        except EngineTransportError as exc:
            self._failed(index, str(exc))
            raise
        self._answered(index)  # any answer, a 5xx too (an overloaded server is alive)
        return reply

    # ---- liveness --------------------------------------------------------------------------

    async def _until_serving(self) -> None:
        """Return once some endpoint answers; while none does, wait for one (the background
        probes notice it), until the engine is gone (`EngineGoneError`)."""
        while True:
            if self._gone is not None:
                raise self._gone
            if not self._health or any(h.failing_since_s is None for h in self._health):
                return
            self._answer.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._answer.wait(), self._config.probe_interval_s)

    def _answered(self, index: int) -> None:
        health = self._health[index]
        was_down = health.down
        since = health.answered()
        self._abandon[index].clear()
        if since is None:
            return
        self._answer.set()
        self._gone = None
        if was_down:
            silent = asyncio.get_running_loop().time() - since
            log.warning("engine %r: %s answers again after %.0f s", self.name, health.url, silent)
        self._judge()

    def _failed(self, index: int, error: str) -> None:
        self._health[index].failed(asyncio.get_running_loop().time(), error)

    def _judge(self) -> None:
        """Declare endpoints down (warning, rate-limited), move work off them, and declare the
        engine gone once no endpoint has answered for `outage_s`."""
        config = self._config
        now = asyncio.get_running_loop().time()
        serving = [h.url for h in self._health if h.failing_since_s is None]
        for index, health in enumerate(self._health):
            if not health.should_be_down(now, config.unresponsive_after_s):
                continue
            health.down = True
            if serving and not config.router:
                self._abandon[index].set()  # its attempts in flight move to `serving`
            if health.warning_due(now, config.warning_interval_s):
                where = (
                    f"its requests go to {', '.join(serving)}"
                    if serving
                    else f"generation waits for it; the run ends if no endpoint answers for "
                    f"{config.outage_s:g} s (outage_s)"
                )
                held = f" ({health.unwarned} warnings held back)" if health.unwarned else ""
                health.unwarned = 0
                log.warning(
                    "engine %r: %s has not answered for %.0f s (last: %s); %s%s",
                    self.name,
                    health.url,
                    health.silent_for_s(now),
                    health.last_error,
                    where,
                    held,
                )
        if self._gone is None and engine_gone(self._health, now, config.outage_s):
            last = "; ".join(f"{h.url}: {h.last_error}" for h in self._health)
            self._gone = EngineGoneError(
                f"engine {self.name!r}: no endpoint has answered for "
                f"{outage_s(self._health, now):.0f} s (outage_s={config.outage_s:g}; {last}); "
                "restart the server(s)"
            )
            for event in (*self._abandon, self._answer):
                event.set()

    async def _monitor_forever(self) -> None:
        while True:
            await asyncio.sleep(self._config.probe_interval_s)
            await self._probe_once()

    async def _probe_once(self) -> None:
        probes = await asyncio.gather(
            *(
                probe_endpoint(self._transport, health.url, self._config.probe_timeout_s)
                for health in self._health
            )
        )
        for index, probe in enumerate(probes):
            if probe.error is None:
                self._answered(index)
            else:
                self._failed(index, probe.error)
        self._judge()

    def _urls(self) -> tuple[str, ...]:
        return self._config.endpoints

    def _url(self, index: int) -> str:
        return self._config.endpoints[index]

    async def _server_info(self, url: str) -> ServerInfo:
        deadline = asyncio.get_running_loop().time() + self._config.startup_timeout_s
        delays = backoff_delays(self._config)
        while True:
            try:
                reply = await self._transport.request(
                    "GET", url + "/server_info", timeout_s=self._config.control_timeout_s
                )
                if reply.status == 404:  # older servers: the deprecated name only
                    reply = await self._transport.request(
                        "GET", url + "/get_server_info", timeout_s=self._config.control_timeout_s
                    )
            except EngineTransportError as exc:
                failure = str(exc)
            else:
                if reply.ok:
                    return parse_server_info(reply.json(), where=url)
                failure = f"/server_info answered {reply.status}: {reply.error_message()}"
            if asyncio.get_running_loop().time() >= deadline:
                raise EngineStartupError(
                    f"no SGLang server answers at {url} ({failure}); start one (see "
                    "docs/sglang.md, or `conductor serve-sim`), or fix `endpoints` in the engine "
                    "config"
                )
            await asyncio.sleep(next(delays))

    def _check_server(self, url: str, info: ServerInfo) -> None:
        if self._config.require_priority_scheduling and not info.priority_scheduling:
            raise EngineStartupError(
                f"{url} runs without priority scheduling, so the rollout's critical-group "
                "priorities would do nothing inside the engine; restart it with "
                "--enable-priority-scheduling (`conductor serve-sglang` adds it), or set "
                "require_priority_scheduling: false in the engine config"
            )
        if self._config.require_radix_cache and not info.radix_cache:
            raise EngineStartupError(
                f"{url} runs with --disable-radix-cache: every turn would re-prefill its whole "
                "context; restart it without that flag, or set require_radix_cache: false"
            )

    async def _check_tokenizer(self, url: str, encode: Callable[[str], Sequence[int]]) -> None:
        body = {"prompt": TOKENIZER_PROBE, "add_special_tokens": False}
        try:
            reply = await self._transport.request(
                "POST",
                url + "/v1/tokenize",
                json_body=body,
                timeout_s=self._config.control_timeout_s,
            )
        except EngineTransportError as exc:
            raise EngineStartupError(f"{url}: /v1/tokenize failed: {exc}") from exc
        if not reply.ok:
            raise EngineStartupError(
                f"{url}: /v1/tokenize answered {reply.status} ({reply.error_message()}); the "
                "tokenizer check needs it"
            )
        theirs = reply.json().get("tokens")
        ours = list(encode(TOKENIZER_PROBE))
        if theirs != ours:
            raise EngineStartupError(
                f"{url} serves a model whose tokenizer does not match the rollout's: the probe "
                f"text is {theirs[:12] if isinstance(theirs, list) else theirs!r}... there and "
                f"{ours[:12]}... here; point the rollout's tokenizer at the served model's"
            )

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self._config.poll_interval_s)
            await self._poll_once()

    async def _poll_once(self) -> None:
        for index, endpoint in enumerate(self._endpoints):
            if not endpoint.metrics or self._health[index].failing_since_s is not None:
                continue  # a failing endpoint: the liveness probe watches it
            try:
                reply = await self._request(
                    index,
                    "GET",
                    endpoint.url + "/metrics",
                    timeout_s=self._config.control_timeout_s,
                )
            except EngineTransportError as exc:
                log.debug("metrics poll of %s failed: %s", endpoint.url, exc)
                continue
            if reply.status == 404:
                endpoint.metrics = False  # no --enable-metrics: count our own requests
                log.info("%s serves no /metrics; load is our own in-flight count", endpoint.url)
            elif reply.ok:
                endpoint.load = parse_metrics(reply.text())
                now = asyncio.get_running_loop().time()
                if endpoint.polled_at is not None and endpoint.load.running_requests:
                    endpoint.busy_s += now - endpoint.polled_at
                endpoint.polled_at = now

    def _check_started(self) -> None:
        if self._closed:
            raise EngineError(f"engine {self.name!r} is closed; connect a new one")
        if not self._endpoints:
            raise EngineError(f"engine {self.name!r} was not started; use SGLangEngine.connect")


async def connect_sglang_engines(
    config: SGLangEngineConfig, *, encode: Callable[[str], Sequence[int]] | None = None
) -> list[Engine]:
    """The started engines `config` stands for: one per endpoint with `engine_per_endpoint`
    (data-parallel ranks the scheduler places samples on), else one that routes itself.
    If one cannot start, the others are closed and the error is raised."""
    engines: list[Engine] = []
    try:
        for part in config.per_endpoint():
            engines.append(await SGLangEngine.connect(part, encode=encode))
    except BaseException:
        for engine in engines:
            await engine.aclose()
        raise
    return engines


def _aborted(request: GenerateRequest) -> GenerateResult:
    """An abort that arrived between two attempts: nothing generated, as for a queued abort."""
    return GenerateResult(
        rid=request.rid,
        output_ids=(),
        output_logprobs=(),
        finish_reason=FinishReason.ABORT,
        prompt_tokens=len(request.input_ids),
    )
