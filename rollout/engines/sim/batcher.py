"""`Batcher`: the sim engine's waiting queue and running batch, and every move between them.

Synchronous and clock-free: the engine (`engine.py`) asks it to form a prefill step or prepare
a decode block, sleeps the forward's duration, then tells it what the forward did. Admission
follows SGLang's `PrefillAdder` (token budget with the `new_token_ratio` estimate, chunked
prefill), memory pressure SGLang's `retract_decode`, priority preemption its
`preempt_to_schedule` (sglang.md §2); the pure rules are in `batching.py`. Two departures keep
a priority KV policy from wedging it: a request follows its session's `set_priority` hints, and
an idle engine admits a more urgent request past a head it cannot admit.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rollout.engines.base import EngineError, FinishReason
from rollout.engines.sim import batching
from rollout.engines.sim.config import SchedulePolicy, SimEngineConfig
from rollout.engines.sim.kv import KVBackend, TransferDirection
from rollout.engines.sim.link import TransferLink
from rollout.engines.sim.request_state import SimRequest, Stage
from rollout.engines.sim.served_model import ServedModelConfig
from rollout.engines.sim.token_model import TokenModel

__all__ = ["Batcher", "Blocked", "Chunk", "SimEngineCounters"]

_BYTES_PER_GB = 1e9
# A priority above any request's: `available_tokens` of it is all the KV the backend could free.
_MOST_URGENT = sys.maxsize


@dataclass(slots=True)
class SimEngineCounters:
    """Cumulative work of the engine (tokens, steps, seconds of simulated GPU time)."""

    prefill_steps: int = 0
    decode_steps: int = 0
    busy_s: float = 0.0
    prefill_busy_s: float = 0.0  # of busy_s, in prefill (or mixed) steps
    prefill_tokens: int = 0  # prompt tokens computed (misses and recomputation)
    decode_tokens: int = 0  # tokens produced by decode steps
    cached_tokens: int = 0  # prefix hits at admission (device + host)
    host_hit_tokens: int = 0  # of which loaded back from host
    admitted: int = 0
    finished: int = 0
    aborted: int = 0
    retractions: int = 0
    preemptions: int = 0
    # an idle engine admitted a more urgent request past a head it could not admit
    idle_bypasses: int = 0
    # What the forwards computed, in the cost model's terms (`rollout.simulation.floor_gap`
    # sets them against the floor of the consumed samples):
    decode_context_tokens: int = 0  # Σ L: the KV each decoded token read
    prefill_attention: float = 0.0  # Σ n(p + n/2) over prefilled chunks
    forward_fixed_s: float = 0.0  # of busy_s, each forward's `forward_fixed_s`


@dataclass(frozen=True, slots=True)
class Chunk:
    """`tokens` new prompt tokens of `request` in one prefill step, after `prefix_tokens`."""

    request: SimRequest
    tokens: int
    prefix_tokens: int


@dataclass(frozen=True, slots=True)
class Blocked:
    """The waiting head that admission refused, and the KV it needed."""

    request: SimRequest
    need_tokens: int


class Batcher:
    """Owns the requests in flight; see the module docstring.

    `on_empty` is called whenever the last request in flight leaves.
    """

    def __init__(
        self,
        config: SimEngineConfig,
        model: ServedModelConfig,
        kv: KVBackend,
        token_model: TokenModel,
        on_empty: Callable[[], None],
        now: Callable[[], float],
    ) -> None:
        self._config = config
        self._now = now  # the engine's simulated time (queue waits are measured on it)
        self._model = model
        self._kv = kv
        self._tokens = token_model
        self._on_empty = on_empty
        self.h2d = TransferLink(config.link.h2d_gb_per_s * _BYTES_PER_GB, config.link.latency_s)
        self.d2h = TransferLink(config.link.d2h_gb_per_s * _BYTES_PER_GB, config.link.latency_s)
        self.live: dict[str, SimRequest] = {}
        self._waiting: list[tuple[int, int, int, SimRequest]] = []
        self.waiting_count = 0
        self.prefilling: list[SimRequest] = []
        self.decoding: list[SimRequest] = []
        self.decode_context = 0  # KV tokens the decoding requests read per step
        self._abort_pending: list[SimRequest] = []
        self.blocked: Blocked | None = None
        # False only after a decode block that cannot have changed whether the blocked head
        # fits (no finish, no abort or hint, admission watch silent): admission skips it.
        self.recheck = True
        self.session_ready_s: dict[str, float] = {}
        self.ratio = config.init_new_token_ratio  # SGLang's new_token_ratio
        self.weight_version = 0
        self.counters = SimEngineCounters()

    @property
    def has_work(self) -> bool:
        return bool(self.waiting_count or self.prefilling or self.decoding)

    @property
    def running_count(self) -> int:
        return len(self.prefilling) + len(self.decoding)

    # ---- the waiting queue ------------------------------------------------------------------

    def enqueue(self, sim: SimRequest) -> None:
        """Add a new, retracted or preempted request to the waiting queue."""
        self.live[sim.rid] = sim
        sim.start_waiting(self._now())
        self._push_waiting(sim)
        self.waiting_count += 1

    def set_session_priority(self, session_id: str, priority: int) -> None:
        """The session's priority changed (a `set_priority` hint): its live requests take it.

        A request keeps the priority it was sent with otherwise, and the KV it may evict is
        judged by it: a request sent while its group was not critical, then queued behind a
        pool full of its now-critical siblings' protected KV, could evict none of it and, with
        nothing running, wait for ever (growth/32B B=16, seed 4, before session 20).
        """
        if not session_id:
            return
        by_priority = self._config.schedule_policy is SchedulePolicy.PRIORITY
        for sim in self.live.values():
            if sim.request.session_id != session_id or sim.priority == priority:
                continue
            sim.priority = priority
            self.recheck = True
            if by_priority and sim.stage is Stage.WAITING:  # its queue place moves with it
                self._push_waiting(sim)

    def _push_waiting(self, sim: SimRequest) -> None:
        """Give `sim` its (new) place in the waiting queue; an earlier entry goes stale (the
        epoch changes) and `peek_waiting` drops it."""
        by_priority = self._config.schedule_policy is SchedulePolicy.PRIORITY
        sim.epoch += 1
        heapq.heappush(
            self._waiting, (-sim.priority if by_priority else 0, sim.seq, sim.epoch, sim)
        )

    def peek_waiting(self) -> SimRequest | None:
        """The head of the waiting queue; entries of requests that left it are dropped lazily."""
        while self._waiting:
            _, _, epoch, sim = self._waiting[0]
            if sim.stage is Stage.WAITING and sim.epoch == epoch:
                return sim
            heapq.heappop(self._waiting)
        return None

    def request_abort(self, sim: SimRequest) -> bool:
        """Abort `sim`: at once if it waits; True if it runs (it stops at the next boundary)."""
        if sim.stage is Stage.DONE or sim.abort_requested:
            return False
        if sim.stage is Stage.WAITING:
            self.finish(sim, FinishReason.ABORT)
            return False
        sim.abort_requested = True
        self._abort_pending.append(sim)
        return True

    def reap_aborts(self) -> None:
        """Return the running requests aborted since the last step boundary."""
        for sim in self._abort_pending:
            if sim.stage is not Stage.DONE:
                self.finish(sim, FinishReason.ABORT)
        self._abort_pending.clear()

    def next_ready_s(self, now: float) -> float | None:
        """When the next admitted request's host→device load lands (None: none in flight)."""
        pending = [sim.ready_at_s for sim in self.prefilling if sim.ready_at_s > now]
        return min(pending) if pending else None

    # ---- admission and prefill ----------------------------------------------------------------

    def form_prefill(self, now: float) -> list[Chunk]:
        """The chunks of the next prefill step (admitting waiting requests); [] if none."""
        budget = self._config.max_prefill_tokens
        chunks: list[Chunk] = []
        stuck = False
        for sim in list(self.prefilling):
            if budget <= 0:
                break
            if sim.ready_at_s <= now:
                chunk = self._schedule_chunk(sim, budget)
                if chunk is None:
                    stuck = True
                    continue
                chunks.append(chunk)
                budget -= chunk.tokens
        blocked, recheck = self.blocked, self.recheck
        self.recheck = True
        if blocked is not None and not recheck and self.peek_waiting() is blocked.request:
            pass  # the same head, and nothing that could let it in has happened since
        else:
            self.blocked = None
            if budget > 0 and self.waiting_count:
                self._admit_waiting(now, budget, chunks)
        if not chunks and stuck and not self.decoding:
            # Admitted prefills cannot get memory and nothing decodes to free any: give the
            # newest one's KV back so the others can finish (SGLang would hit OOM here).
            self.retract(self.prefilling[-1])
        for chunk in chunks:
            chunk.request.stop_waiting(now)  # its forward starts: the wait (if any) ends
        return chunks

    def _admit_waiting(self, now: float, budget: int, chunks: list[Chunk]) -> None:
        """Admit waiting requests in queue order while budget, slots and KV allow."""
        reserve = self._running_reserve(chunks)
        while budget > 0 and self.waiting_count:
            head = self.peek_waiting()
            if head is None:
                return
            need = self._admit(head, now, reserve, chunks)
            if need is None and not self.running_count:
                head, need = self._admit_past_blocked_head(head, now, reserve, chunks)
            if head is None or need is None:
                return
            reserve += need
            if head.ready_at_s <= now:
                chunk = self._schedule_chunk(head, budget)
                if chunk is None:
                    return
                chunks.append(chunk)
                budget -= chunk.tokens
                reserve -= chunk.tokens  # allocated now, no longer a reservation

    def _admit_past_blocked_head(
        self, head: SimRequest, now: float, reserve: float, chunks: Sequence[Chunk]
    ) -> tuple[SimRequest | None, int | None]:
        """On an idle engine, try the most urgent waiting request that outranks the blocked head.

        The queue is first come, first served, and a priority policy keeps KV it protects for
        urgent sessions from less urgent requests. A low head held back by a critical session's
        protected KV, with nothing running, waits until that KV moves; if the critical
        session's next request has queued behind it, nothing ever moves it, and the engine idles
        for ever. That request goes first instead (its own KV is likely the protected one).
        Returns what it admitted and with how much KV, or (None, None).
        """
        blocked = self.blocked
        candidate = self._most_urgent_waiting(above=head.priority)
        if candidate is None:
            return None, None
        need = self._admit(candidate, now, reserve, chunks)
        if need is None:
            self.blocked = blocked  # the head stays the one to recheck
            return None, None
        self.counters.idle_bypasses += 1
        return candidate, need

    def _most_urgent_waiting(self, above: int) -> SimRequest | None:
        """The waiting request of the highest priority above `above` (first come among equals)."""
        best: SimRequest | None = None
        for _, _, epoch, sim in self._waiting:
            if sim.stage is not Stage.WAITING or sim.epoch != epoch or sim.priority <= above:
                continue
            if best is None or (sim.priority, -sim.seq) > (best.priority, -best.seq):
                best = sim
        return best

    def _schedule_chunk(self, sim: SimRequest, budget: int) -> Chunk | None:
        tokens = min(sim.fill_target - sim.prefilled, self._config.chunked_prefill_tokens, budget)
        last = sim.prefilled + tokens == sim.fill_target
        # The last chunk also gets the KV slot of the token its forward samples.
        if self._kv.reserve(sim.rid, tokens + int(last), sim.priority):
            return None
        return Chunk(sim, tokens, sim.prefilled)

    def _running_reserve(self, chunks: Sequence[Chunk]) -> float:
        """KV admission keeps free for running requests (SGLang PrefillAdder's offset)."""
        clip = self._config.clip_max_new_tokens
        decode = 0
        for sim in self.decoding:
            remaining = sim.max_new - sim.generated
            decode += remaining if remaining < clip else clip
        fill = 0
        for sim in self.prefilling:
            remaining = sim.max_new - sim.generated
            decode += remaining if remaining < clip else clip
            fill += sim.fill_target - sim.prefilled
        fill -= sum(chunk.tokens for chunk in chunks)  # already allocated
        return self.ratio * decode + fill

    def _admit(
        self, head: SimRequest, now: float, reserve: float, chunks: Sequence[Chunk]
    ) -> int | None:
        """Try to admit the waiting head (preempting if allowed).

        Returns the KV it was admitted with (its load, prefill and clipped decode), or None when
        it stays waiting.
        """
        config = self._config
        if self.running_count >= config.max_running_requests:
            if not self._preempt_for(head, need_tokens=0, need_slot=True):
                return None
            reserve = self._running_reserve(chunks)
        priority = head.priority
        match = self._kv.acquire(head.rid, head.fill_ids, priority, head.request.session_id)
        prefill = head.fill_target - match.cached_tokens
        need = batching.admission_need(
            match.host_tokens, prefill, head.remaining_new_tokens, config.clip_max_new_tokens
        )
        available = self._kv.available_tokens(priority)
        fits = need < available - reserve
        if not fits and not self.running_count:
            # Nothing runs that could free KV: admit if its load and prefill fit, counting the
            # slot of the token the last chunk samples (else it would be admitted and stuck).
            fits = match.host_tokens + prefill + 1 <= available
        if not fits:
            self._kv.release(head.rid, head.fill_ids, 0)
            deficit = int(need + reserve - available) + 1
            if self._preempt_for(head, need_tokens=deficit, need_slot=False):
                return self._admit(head, now, self._running_reserve(chunks), chunks)
            self.blocked = Blocked(head, need)
            return None
        ready = now
        if match.host_tokens:
            loaded = self._kv.load_back(head.rid)
            if loaded.shortfall_tokens:
                self._kv.release(head.rid, head.fill_ids, 0)
                self.blocked = Blocked(head, need)
                return None
            ready = self.h2d.schedule(now, loaded.tokens * self._model.kv_bytes_per_token)
        self.waiting_count -= 1
        head.stage = Stage.PREFILL
        head.prefilled = match.cached_tokens
        head.ready_at_s = max(ready, self.session_ready_s.get(head.request.session_id, 0.0))
        if head.cached_tokens < 0:
            head.cached_tokens = match.cached_tokens
        self.prefilling.append(head)
        self.counters.admitted += 1
        self.counters.cached_tokens += match.cached_tokens
        self.counters.host_hit_tokens += match.host_tokens
        return need

    def finish_chunk(self, chunk: Chunk) -> None:
        """A prefill step computed `chunk`; a completed prompt moves on to decode."""
        sim = chunk.request
        sim.prefilled += chunk.tokens
        self._kv.commit(sim.rid, sim.fill_ids, sim.prefilled)
        if sim.prefilled < sim.fill_target:
            return
        self.prefilling.remove(sim)
        sim.generated += 1  # the prefill forward samples the first new token
        sim.stage = Stage.DECODE
        if sim.generated >= sim.target:
            self.finish(sim, sim.stop_reason)
            return
        self.decoding.append(sim)
        self.decode_context += sim.context_tokens

    # ---- decode -------------------------------------------------------------------------------

    def admission_watch(self) -> batching.AdmissionWatch | None:
        """A watch on the memory-blocked head for the next decode block (None: nothing to watch)."""
        blocked = self.blocked
        if blocked is None or not self.decoding:
            return None
        if self.running_count >= self._config.max_running_requests:
            return None  # blocked by slots: only a finish (which ends the block) frees one
        fixed = batching.decode_reserve_tokens(
            self.ratio,
            [sim.remaining_new_tokens for sim in self.prefilling],
            self._config.clip_max_new_tokens,
        ) + sum(sim.fill_target - sim.prefilled for sim in self.prefilling)
        return batching.AdmissionWatch(
            self._config,
            need_tokens=blocked.need_tokens,
            available_tokens=self._kv.available_tokens(blocked.request.priority),
            remaining_new_tokens=[sim.remaining_new_tokens for sim in self.decoding],
            fixed_reserve_tokens=fixed,
            ratio=self.ratio,
        )

    def prepare_decode(self, steps: int) -> int:
        """Reserve KV so every decoding request can take up to `steps` steps; retract if none can.

        Returns the steps all of them can take (0 only if the batch is empty). Whatever a block
        does not use is given back after it (`advance_decodes`), so between rounds each request
        holds exactly the KV of its tokens, as in an engine that allocates step by step.
        """
        while self.decoding:
            lowest = min(sim.priority for sim in self.decoding)
            possible = min(steps, self._kv.available_tokens(lowest) // len(self.decoding))
            if possible >= 1:
                if not self._kv.reserve_each([sim.rid for sim in self.decoding], possible, lowest):
                    for sim in self.decoding:
                        sim.ahead = possible
                    return possible
                for sim in list(self.decoding):  # refused as a whole: request by request
                    if self._kv.reserve(sim.rid, possible, sim.priority):
                        self.retract(sim)  # the policy refused it after all
                        continue
                    sim.ahead = possible
                return possible if self.decoding else 0
            self._retract_for_decode()
        return 0

    def _retract_for_decode(self) -> None:
        """Out of KV for one more step: retract in policy order (SGLang `retract_decode`)."""
        config = self._config
        if len(self.decoding) == 1:
            sim = self.decoding[0]
            if self._kv.available_tokens(_MOST_URGENT) > self._kv.available_tokens(sim.priority):
                # The backend keeps room from it for more urgent sessions (a priority policy):
                # wait for that room to be given up instead of failing.
                self.retract(sim)
                return
            self.fail(
                sim,
                EngineError(
                    f"request {sim.rid!r} alone does not fit in the KV pool "
                    f"({self._kv.capacity_tokens} tokens); shorten it or use a larger pool"
                ),
            )
            return
        views = [
            batching.RunningView(i, sim.seq, sim.priority, sim.input_tokens, sim.generated, 0)
            for i, sim in enumerate(self.decoding)
        ]
        order = [
            self.decoding[i] for i in batching.retraction_order(config.retraction_policy, views)
        ]
        for sim in order:
            if len(self.decoding) <= 1:
                break
            self.retract(sim)
            lowest = min(s.priority for s in self.decoding)
            if self._kv.available_tokens(lowest) >= config.retract_decode_steps * len(
                self.decoding
            ):
                break
        decoded = sum(sim.generated for sim in self.decoding)
        budget = sum(sim.max_new for sim in self.decoding)
        self.ratio = min(
            1.0, (decoded + config.retract_decode_steps * len(self.decoding)) / max(1, budget)
        )

    def advance_decodes(self, batch: list[SimRequest], steps: int) -> None:
        """`batch` decoded `steps` tokens each; finished requests return, spare KV goes back."""
        self.ratio = batching.decayed_ratio(self._config, self.ratio, steps)
        self.counters.decode_tokens += len(batch) * steps
        self.decode_context += len(batch) * steps
        spare: list[tuple[str, int]] = []
        finished: list[SimRequest] = []
        for sim in batch:
            sim.generated += steps
            sim.ahead -= steps
            if sim.generated >= sim.target:
                finished.append(sim)
            elif sim.ahead:
                spare.append((sim.rid, sim.ahead))
                sim.ahead = 0
        if spare:
            self._kv.unreserve_each(spare)
        for sim in finished:
            self.finish(sim, sim.stop_reason)

    # ---- retraction, preemption, results ----------------------------------------------------

    def _preempt_for(self, head: SimRequest, *, need_tokens: int, need_slot: bool) -> bool:
        config = self._config
        if not config.priority_preemption:
            return False
        running = [*self.prefilling, *self.decoding]
        views = [
            batching.RunningView(
                i,
                sim.seq,
                sim.priority,
                sim.input_tokens,
                sim.generated,
                sim.context_tokens,
            )
            for i, sim in enumerate(running)
        ]
        victims = batching.preemption_victims(
            views, head.priority, config.preemption_threshold, need_tokens, need_slot
        )
        for index in victims:
            self.retract(running[index])
            self.counters.preemptions += 1
        return bool(victims)

    def retract(self, sim: SimRequest) -> None:
        """Free `sim`'s KV beyond its cached prefix and requeue it (SGLang `release_req`)."""
        self._kv.release(sim.rid, sim.fill_ids, sim.prefilled)
        self._leave_running(sim)
        sim.requeue()
        self.enqueue(sim)
        self.counters.retractions += 1

    def _leave_running(self, sim: SimRequest) -> None:
        if sim.stage is Stage.DECODE and sim in self.decoding:
            self.decoding.remove(sim)
            self.decode_context -= sim.context_tokens
        elif sim.stage is Stage.PREFILL:
            self.prefilling.remove(sim)

    def _release_kv(self, sim: SimRequest) -> None:
        if sim.stage is Stage.DECODE:
            # Prompt + output so far stay cached; the last sampled token has no KV yet.
            self._kv.release(sim.rid, sim.kv_ids(), sim.input_tokens + sim.generated - 1)
        elif sim.stage is Stage.PREFILL:
            self._kv.release(sim.rid, sim.fill_ids, sim.prefilled)

    def _leave(self, sim: SimRequest) -> None:
        if sim.stage is Stage.WAITING:
            self.waiting_count -= 1
        else:
            self._release_kv(sim)
            self._leave_running(sim)
        sim.stage = Stage.DONE
        self.live.pop(sim.rid, None)
        if not self.live:
            self._on_empty()

    def finish(self, sim: SimRequest, reason: FinishReason) -> None:
        """Return `sim`'s result to its caller and release its KV (cached as SGLang does)."""
        sim.stop_waiting(self._now())  # aborted before its next forward
        self._leave(sim)
        self._tokens.on_finish(sim.request, sim.generated, reason)
        if reason is FinishReason.ABORT:
            self.counters.aborted += 1
        else:
            self.counters.finished += 1
        if not sim.future.done():
            sim.future.set_result(sim.result(reason, self.weight_version))

    def fail(self, sim: SimRequest, error: EngineError) -> None:
        """Raise `error` to `sim`'s caller and release its KV."""
        self._leave(sim)
        if not sim.future.done():
            sim.future.set_exception(error)

    def fail_all(self, error: EngineError) -> None:
        """Raise `error` to every caller in flight and forget them (engine closed or crashed)."""
        for sim in list(self.live.values()):
            sim.stage = Stage.DONE
            if not sim.future.done():
                sim.future.set_exception(error)
        self.live.clear()
        self._waiting.clear()
        self.waiting_count = 0
        self.prefilling.clear()
        self.decoding.clear()
        self._on_empty()

    def drain_transfers(self, now: float) -> None:
        """Charge the backend's background copies to the link; note when prefetches land."""
        for transfer in self._kv.drain_transfers():
            nbytes = transfer.tokens * self._model.kv_bytes_per_token
            if transfer.direction is TransferDirection.D2H:
                self.d2h.schedule(now, nbytes)
            else:
                lands = self.h2d.schedule(now, nbytes)
                if transfer.session_id:
                    self.session_ready_s[transfer.session_id] = lands
