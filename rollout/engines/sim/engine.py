"""`SimEngine`: an in-process continuous-batching engine that simulates SGLang's timing and KV.

It implements `rollout.engines.base.Engine`. One owned asyncio task (the step loop) runs while
there is work: each round the `Batcher` admits waiting requests under SGLang's token budget and
forms one prefill step (chunked; decodes stall unless `mixed_chunk`) or a block of decode steps,
and the loop sleeps each forward's cost-model duration on the loop clock (`asyncio` only, so
virtual time works). A decode block covers several steps at once while the batch cannot change;
an arrival, an abort or a hint wakes the loop, and the block then ends after the step in flight,
exactly where a real engine would pick the change up. KV placement is a `KVBackend`'s job,
token content a `TokenModel`'s.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import fields
from types import TracebackType
from typing import Any

from foundation.clock import LoopClock
from rollout.engines.base import (
    EngineError,
    EngineStats,
    GenerateRequest,
    GenerateResult,
    KVHint,
    KVHintKind,
)
from rollout.engines.sim import batching
from rollout.engines.sim.batcher import Batcher, Blocked, Chunk, SimEngineCounters
from rollout.engines.sim.config import PauseMode, SimEngineConfig
from rollout.engines.sim.cost_model import (
    forward_fixed_s,
    prefill_attention_units,
    step_time_s,
)
from rollout.engines.sim.kv import KVBackend
from rollout.engines.sim.request_state import SimRequest, Stage
from rollout.engines.sim.served_model import ServedModelConfig
from rollout.engines.sim.token_model import TokenModel
from rollout.engines.step_fill import StepFill

__all__ = ["SimEngine", "SimEngineCounters"]


class SimEngine:
    """A simulated SGLang-like engine; see the module docstring. It lives on one event loop.

    Args:
        config: batching and scheduling (`configs/engine/sim.yaml`).
        model: the model, its GPU and cost coefficients (`configs/model/*.yaml`).
        kv: the KV backend (e.g. `LRURadixKV` sized from `model`).
        token_model: decides the generated tokens.
    """

    def __init__(
        self,
        config: SimEngineConfig,
        model: ServedModelConfig,
        kv: KVBackend,
        token_model: TokenModel,
    ) -> None:
        if kv.page_tokens != config.page_tokens:
            raise EngineError(
                f"KV backend pages hold {kv.page_tokens} tokens but the engine config says "
                f"{config.page_tokens}; build both from the same config"
            )
        self.name = config.name
        self._config = config
        self._model = model
        self._kv = kv
        self._tokens = token_model
        self._clock = LoopClock()
        self._drained = asyncio.Event()
        self._batch = Batcher(
            config, model, kv, token_model, on_empty=self._drained.set, now=self._sync_now
        )
        self._seq = itertools.count()
        self._now_s = 0.0
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._closed = False
        self._crash: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake_future: asyncio.Future[bool] | None = None
        # An in-place or retract pause freezes the step loop between rounds (SGLang keeps the
        # requests); `_thawed` is set while it runs, `_frozen_at_round` once it has stopped.
        self._freeze: PauseMode | None = None
        self._thawed = asyncio.Event()
        self._thawed.set()
        self._frozen_at_round = asyncio.Event()
        self._step_fill = StepFill()

    @property
    def step_fill(self) -> StepFill:
        """Every forward's tokens against its budget (live object; health metrics read it)."""
        return self._step_fill

    @property
    def kv(self) -> KVBackend:
        """The KV backend this engine drives (for inspection; do not drive it from outside)."""
        return self._kv

    @property
    def config(self) -> SimEngineConfig:
        return self._config

    def live_rids(self) -> list[str]:
        """Rids of the requests queued or running now."""
        return list(self._batch.live)

    def is_waiting(self, rid: str) -> bool | None:
        """Whether `rid` waits for admission (False: it runs; None: not live)."""
        sim = self._batch.live.get(rid)
        return None if sim is None else sim.stage is Stage.WAITING

    @property
    def counters(self) -> SimEngineCounters:
        """Cumulative steps, tokens and busy seconds (live object; copy it to keep a snapshot)."""
        return self._batch.counters

    # ---- Engine protocol --------------------------------------------------------------------

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        """Queue `request` and return its result (partial, with `ABORT`, if aborted)."""
        self._check_open()
        await self._resumed.wait()
        self._check_open()
        max_new = self._validate(request)
        for hint in request.kv_hints:
            self._kv.hint(hint)
        self._batch.drain_transfers(self._sync_now())  # copies the hints started begin now
        plan = self._tokens.plan(request)
        future: asyncio.Future[GenerateResult] = asyncio.get_running_loop().create_future()
        sim = SimRequest(request, plan, next(self._seq), future, max_new)
        self._drained.clear()
        self._batch.enqueue(sim)
        self._kick()
        expiry = self._abort_at_deadline(sim)
        try:
            return await future
        except asyncio.CancelledError:
            self._request_abort(sim)  # the caller gave up: free the slot like a disconnect
            raise
        finally:
            if expiry is not None:
                expiry.cancel()

    def _abort_at_deadline(self, sim: SimRequest) -> asyncio.TimerHandle | None:
        """Abort `sim` when its deadline passes (it stops at the next step boundary, with its
        output so far, as `abort` does); the handle is cancelled when it returns first."""
        deadline_s = sim.request.deadline_s
        if deadline_s is None:
            return None
        delay = max(0.0, deadline_s - self._clock.now())
        return asyncio.get_running_loop().call_later(delay, self._request_abort, sim)

    async def abort(self, rid: str) -> None:
        sim = self._batch.live.get(rid)
        if sim is not None:
            self._request_abort(sim)

    async def send_kv_hints(self, hints: Sequence[KVHint]) -> None:
        blocked = self._batch.blocked
        room_before = self._room_for(blocked)
        for hint in hints:
            self._kv.hint(hint)
            if hint.kind is KVHintKind.SET_PRIORITY:
                self._batch.set_session_priority(hint.session_id, hint.priority)
            elif hint.kind is KVHintKind.CLOSE:
                self._batch.session_ready_s.pop(hint.session_id, None)
                forget = getattr(self._tokens, "forget", None)
                if forget is not None:  # the session is over: its script goes (issue 28's RSS)
                    forget(hint.session_id)
        self._batch.drain_transfers(self._sync_now())
        if blocked is not None and (
            self._room_for(blocked) != room_before
            or any(hint.session_id == blocked.request.request.session_id for hint in hints)
        ):
            # The policy made (or took) room for the blocked head, or moved its own KV: admission
            # must look again. Other hints cannot change its answer, so they do not wake it.
            self._wake(recheck=True)

    def _room_for(self, blocked: Blocked | None) -> int:
        """KV the blocked head could get now (0 when nothing is blocked)."""
        if blocked is None:
            return 0
        return self._kv.available_tokens(blocked.request.priority)

    async def pause(self) -> None:
        self._resumed.clear()
        for sim in list(self._batch.live.values()):
            self._request_abort(sim)
        if self._batch.live:
            await self._drained.wait()

    async def pause_generation(self, mode: PauseMode) -> None:
        """SGLang's `/pause_generation`: `abort` is `pause()`; `in_place` stops the step loop
        with every request kept (KV too); `retract` also sends running requests back to the
        waiting queue with their KV freed (recomputed after `resume`). Returns once no
        forward runs; new requests queue until `resume`."""
        if mode == "abort":
            await self.pause()
            return
        self._freeze = mode
        self._thawed.clear()
        self._frozen_at_round.clear()
        if self._task is None or self._task.done():
            self._freeze_now()
            return
        self._wake(recheck=True)  # a decode block ends after the step in flight
        await self._frozen_at_round.wait()

    async def resume(self) -> None:
        self._freeze = None
        self._thawed.set()
        self._resumed.set()

    async def update_weights(self, version: int, *, flush_cache: bool = True) -> None:
        """Install `version` (after `weight_update_s`); flush the prefix cache if both
        `flush_cache` and the config's `flush_cache_on_weight_update` say so."""
        if self._config.weight_update_s > 0:
            await asyncio.sleep(self._config.weight_update_s)
        for sim in self._batch.live.values():  # kept through an in-place or retract pause
            sim.note_version_change(self._batch.weight_version)
        self._batch.weight_version = version
        if flush_cache and self._config.flush_cache_on_weight_update:
            self._kv.flush()

    def flush_cache(self) -> bool:
        """Drop every cached prefix; refused (False) while requests run or wait, as SGLang does."""
        if self._batch.live:
            return False
        self._kv.flush()
        return True

    @property
    def paused(self) -> bool:
        """Whether a pause holds (no new work starts until `resume`)."""
        return self._freeze is not None or not self._resumed.is_set()

    def stats(self) -> EngineStats:
        kv = self._kv.stats()
        batch = self._batch
        extra = {name: float(value) for name, value in _flat_fields(batch.counters)}
        for name, value in _flat_fields(kv):  # kv_<counter>, for every counter it tracks
            if value is not None and name not in ("capacity_tokens", "used_tokens"):
                extra[f"kv_{name}"] = float(value)
        extra.update(
            h2d_busy_s=batch.h2d.busy_s,
            d2h_busy_s=batch.d2h.busy_s,
            h2d_bytes=float(batch.h2d.moved_bytes),
            d2h_bytes=float(batch.d2h.moved_bytes),
            new_token_ratio=batch.ratio,
        )
        return EngineStats(
            running_requests=batch.running_count,
            waiting_requests=batch.waiting_count,
            max_running_requests=self._config.max_running_requests,
            kv_used_tokens=kv.used_tokens,
            kv_capacity_tokens=kv.capacity_tokens,
            weight_version=batch.weight_version,
            extra=extra,
        )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._resumed.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
        self._batch.fail_all(EngineError(f"engine {self.name!r} was closed while this ran"))

    async def __aenter__(self) -> SimEngine:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ---- arrival, abort ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._crash is not None:
            raise EngineError(
                f"engine {self.name!r} crashed ({self._crash!r}); this is a bug in the simulator"
            ) from self._crash
        if self._closed:
            raise EngineError(f"engine {self.name!r} is closed; create a new one")

    def _validate(self, request: GenerateRequest) -> int:
        """Reject what no engine could serve; return the effective max_new_tokens."""
        if request.rid in self._batch.live:
            raise EngineError(f"request id {request.rid!r} is already in flight; use unique rids")
        prompt = len(request.input_ids)
        if prompt == 0:
            raise EngineError(f"request {request.rid!r} has no input tokens")
        if request.sampling.max_new_tokens < 1:
            raise EngineError(f"request {request.rid!r}: max_new_tokens must be >= 1")
        room = min(self._model.max_context_tokens, self._kv.capacity_tokens) - prompt
        if room < 1:
            raise EngineError(
                f"request {request.rid!r}: {prompt} prompt tokens leave no room under the "
                f"context limit {self._model.max_context_tokens} / KV pool "
                f"{self._kv.capacity_tokens}; truncate the context"
            )
        return min(request.sampling.max_new_tokens, room)

    def _request_abort(self, sim: SimRequest) -> None:
        if self._batch.request_abort(sim):
            self._wake(recheck=True)

    # ---- the step loop ------------------------------------------------------------------------

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"{self.name}-step-loop"
            )
        else:
            self._wake(recheck=False)  # queued behind the head (or ahead of it: seen by identity)

    def _wake(self, *, recheck: bool) -> None:
        self._batch.recheck = self._batch.recheck or recheck
        future = self._wake_future
        if future is not None and not future.done():
            future.set_result(True)

    async def _run(self) -> None:
        try:
            while self._batch.has_work:
                await self._round()
            self._batch.ratio = self._config.init_new_token_ratio  # SGLang resets it when idle
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug: fail every caller (and later ones) instead of hanging
            self._crash = exc
            self._batch.fail_all(EngineError(f"the sim engine's step loop crashed: {exc!r}"))
        finally:
            if self._freeze is not None:
                self._frozen_at_round.set()  # the loop stopped before it reached the freeze

    def _freeze_now(self) -> None:
        if self._freeze == "retract":
            for sim in [*self._batch.decoding, *self._batch.prefilling]:
                self._batch.retract(sim)
        self._frozen_at_round.set()

    async def _round(self) -> None:
        if self._freeze is not None:
            self._freeze_now()
            await self._thawed.wait()
        batch = self._batch
        retractions = batch.counters.retractions
        now = self._sync_now()
        batch.reap_aborts()
        chunks = batch.form_prefill(now)
        if chunks:
            await self._prefill_step(now, chunks)
        elif batch.decoding:
            await self._decode_block(now)
        else:
            ready = batch.next_ready_s(now)
            if ready is not None:
                await self._sleep_until(ready, wakeable=True)
            elif batch.counters.retractions == retractions:
                await self._sleep_until(None, wakeable=True)  # only an event can unblock it

    def _sync_now(self) -> float:
        self._now_s = max(self._now_s, self._clock.now())
        return self._now_s

    async def _sleep_until(self, end_s: float | None, *, wakeable: bool) -> bool:
        """Sleep on the loop clock until `end_s` (None: until woken); True if woken early."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        handle = None
        if end_s is not None:
            delay = max(0.0, end_s - self._clock.now())
            handle = loop.call_later(delay, _resolve, future, False)
        if wakeable:
            self._wake_future = future
        try:
            return await future
        finally:
            if handle is not None:
                handle.cancel()
            if self._wake_future is future:
                self._wake_future = None

    async def _prefill_step(self, now: float, chunks: list[Chunk]) -> None:
        batch = self._batch
        decoding: list[SimRequest] = []
        if self._config.mixed_chunk and batch.decoding and batch.prepare_decode(1):
            decoding = list(batch.decoding)
        prefill_tokens = sum(chunk.tokens for chunk in chunks)
        decode_context = batch.decode_context if decoding else 0
        attention = sum(prefill_attention_units(c.tokens, c.prefix_tokens) for c in chunks)
        duration = step_time_s(
            self._model.cost,
            decode_requests=len(decoding),
            decode_context_tokens=decode_context,
            prefill_tokens=prefill_tokens,
            prefill_attention=attention,
        )
        self._kv.before_forward(prefill_tokens + len(decoding))
        batch.drain_transfers(now)  # proactive copies start with the forward, not after it
        end = now + duration
        await self._sleep_until(end, wakeable=False)
        self._now_s = max(self._now_s, end)
        counters = batch.counters
        counters.busy_s += duration
        counters.prefill_busy_s += duration
        counters.prefill_steps += 1
        counters.prefill_tokens += prefill_tokens
        counters.prefill_attention += attention
        counters.decode_context_tokens += decode_context
        counters.forward_fixed_s += forward_fixed_s(
            self._model.cost, prefill_tokens + len(decoding)
        )
        config = self._config
        self._step_fill.record("prefill", prefill_tokens + len(decoding), config.max_prefill_tokens)
        if decoding:
            batch.advance_decodes(decoding, 1)
        for chunk in chunks:
            batch.finish_chunk(chunk)
        batch.drain_transfers(end)

    async def _decode_block(self, now: float) -> None:
        batch = self._batch
        watch = batch.admission_watch()
        cap = min(
            self._config.max_block_steps,
            min(sim.target - sim.generated for sim in batch.decoding),
        )
        retractions = batch.counters.retractions
        steps = batch.prepare_decode(cap)
        if steps == 0:
            return
        if batch.counters.retractions != retractions:
            watch, steps = None, 1  # the queue changed: re-plan after one step
        block = batching.plan_decode_block(
            self._model.cost,
            start_s=now,
            batch=len(batch.decoding),
            context_tokens=batch.decode_context,
            max_steps=steps,
            stop_at_s=batch.next_ready_s(now),
            watch=watch,
        )
        ends = block.step_ends_s
        self._kv.before_forward(len(batch.decoding) * len(ends))
        batch.drain_transfers(now)  # proactive copies start with the block, not after it
        batch.recheck = watch is None
        done = len(ends)
        if await self._sleep_until(ends[-1], wakeable=True):
            done = batching.steps_done_by(ends, self._clock.now())
            await self._sleep_until(ends[done - 1], wakeable=False)
        end = ends[done - 1]
        self._now_s = max(self._now_s, end)
        counters = batch.counters
        counters.busy_s += end - now
        counters.decode_steps += done
        width = len(batch.decoding)  # step k of the block read decode_context + k × width
        counters.decode_context_tokens += (
            done * batch.decode_context + width * done * (done - 1) // 2
        )
        counters.forward_fixed_s += done * forward_fixed_s(self._model.cost, width)
        self._step_fill.record(
            "decode", len(batch.decoding), self._config.max_running_requests, done
        )
        finished = counters.finished
        batch.advance_decodes(list(batch.decoding), done)
        if counters.finished != finished or (done == len(ends) and block.admits_after_last):
            batch.recheck = True
        batch.drain_transfers(end)


def _resolve(future: asyncio.Future[bool], woken: bool) -> None:
    if not future.done():
        future.set_result(woken)


def _flat_fields(record: Any) -> list[tuple[str, Any]]:
    """A flat dataclass's (name, value) pairs; `asdict`'s deep copy is the cost of a stats call
    (and `fields()` builds its tuple anew each time: the names are cached per type)."""
    names = _FIELD_NAMES.get(type(record))
    if names is None:
        names = _FIELD_NAMES[type(record)] = tuple(field.name for field in fields(record))
    return [(name, getattr(record, name)) for name in names]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
