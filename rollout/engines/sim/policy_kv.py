"""`PolicyKV`: the sim engine's `KVBackend` over a `kvcache` policy (the priority-aware manager).

The engine speaks in requests (`rid`s holding a locked prefix and private KV); a `kvcache.KVPolicy`
speaks in token sequences, lock receipts and pooled reservations. This adapter keeps, per request,
what it matched, its lock receipt and its private reservation, and translates:

- `acquire` looks up the cached prefix of all but the last token (from where the session's
  context ends, when the request continues it) and locks its device part; that lookup is
  counted (hit rates, recomputed tokens) only once the engine admits the request (its first
  `load_back`, `reserve` or `commit`), so an admission refused and retried counts once.
- `load_back` copies the host part to the device and re-locks the whole prefix; the engine
  charges the copy to its link.
- `reserve`/`unreserve` reserve and return pooled device tokens; `commit` inserts the computed
  whole pages (as the session's context when the session is open) and moves the lock onto
  them in the same call; `release` commits, returns the rest of the reservation and unlocks.
- Session hints go through `kvcache.apply_hint` with the engine's integer priority mapped at
  `high_priority_min`. Hints for sessions that are not open are counted and ignored (a late hint
  must not fail a rollout); a second `open` changes the priority. Requests of sessions that were
  never opened cache their KV as ordinary, unreferenced prefixes.
- Every copy the policy decides comes back from `drain_transfers`: offloads (proactive or by
  eviction) as one device→host transfer, each prefetch as a host→device transfer naming its
  session, so the engine delays that session's next prefill until the copy lands. (With
  `offload_unreferenced`, what a prefetch's own eviction offloads is not reported by the policy
  and so not charged.) Prefetches start in `before_forward`, which the engine calls once per
  prefill step or decode block, so a prefetch can start up to one block late.
- `flush` (new weights) replaces the policy with a fresh one, re-opening the open sessions and
  keeping the counters; while requests still hold KV it waits until the last one leaves
  (SGLang refuses to flush a busy engine instead).

Time is read from a `Clock` (the loop clock by default, so it is virtual time under `run_virtual`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from foundation.clock import Clock, LoopClock
from kvcache import (
    AllocationResult,
    KVCacheConfig,
    KVDecision,
    KVPolicy,
    KVPolicyRegistry,
    LockReceipt,
    OffloadDecision,
    PrefetchDecision,
    Priority,
    apply_hint,
    check_cache,
    make_kv_policy,
)
from kvcache import KVStats as PolicyStats
from kvcache import PrefixMatch as PolicyMatch
from kvcache.page_keys import TokenPrefix
from kvcache.policy_base import CachePolicyBase
from rollout.engines.base import KVHint, KVHintKind
from rollout.engines.sim.kv import (
    CachedPrefix,
    KVBackendStats,
    LoadBack,
    TokenSeq,
    Transfer,
    TransferDirection,
    give_back_each,
)

__all__ = ["PolicyKV"]

# Counters of `kvcache.KVStats` that accumulate over flushes; the rest are gauges of the live cache.
_GAUGES = frozenset(
    {
        "policy",
        "device_capacity_tokens",
        "host_capacity_tokens",
        "device_used_tokens",
        "host_used_tokens",
        "reserved_tokens",
        "mean_device_used_tokens",
        "peak_device_used_tokens",
        "occupancy_samples",
    }
)


class _Hold:
    """What one request holds: the ids it matched, its lock, its private reservation."""

    __slots__ = (
        "counted",
        "ids",
        "lookup",
        "matched",
        "pos",
        "priority",
        "private",
        "receipt",
        "session",
    )

    def __init__(
        self,
        ids: TokenSeq,
        lookup: PolicyMatch,
        receipt: LockReceipt,
        priority: Priority,
        session: str,
    ) -> None:
        self.ids = ids  # the sequence it was acquired with (not copied)
        self.lookup = lookup  # what acquire found (counted in the stats once admitted)
        self.matched = lookup.device_tokens + lookup.host_tokens  # cached prefix at acquire
        self.pos = lookup.device_tokens  # tokens of the prefix locked on device (page-aligned)
        self.receipt = receipt
        self.priority = priority
        self.session = session
        self.private = 0  # reserved device tokens not yet handed to the cache
        self.counted = False  # the admission lookup was counted in the policy's stats


class PolicyKV:
    """A `KVBackend` that delegates every placement decision to a `kvcache.KVPolicy`.

    Args:
        config: the policy and its sizes; `page_size` must equal the engine's `page_tokens`, and
            the transfer model should match the engine's link (`build_policy_kv` derives both).
        clock: where `now` comes from (default: the running loop's clock).
        registry: policy factories by name (default: the shipped 'priority' and 'lru').
    """

    def __init__(
        self,
        config: KVCacheConfig,
        *,
        clock: Clock | None = None,
        registry: KVPolicyRegistry | None = None,
    ) -> None:
        self._config = config
        self._registry = registry
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._policy = make_kv_policy(config, registry)
        self._page = config.page_size
        self._high_min = config.high_priority_min
        self._holds: dict[str, _Hold] = {}
        self._open: dict[str, int] = {}  # open sessions and their engine priority
        self._pending_d2h = 0
        self._pending_h2d: list[Transfer] = []
        self._retired: dict[str, int] = {}  # counters of policies replaced by a flush
        self._flush_pending = False
        self.flushes = 0
        self.ignored_hints = 0  # hints for sessions that were not open

    # ---- queries --------------------------------------------------------------------------

    @property
    def policy(self) -> KVPolicy:
        """The live policy (for inspection; do not drive it from outside)."""
        return self._policy

    @property
    def page_tokens(self) -> int:
        return self._page

    @property
    def capacity_tokens(self) -> int:
        return self._config.device_capacity_tokens

    def available_tokens(self, priority: int) -> int:
        policy = self._policy
        return policy.free_device_tokens + policy.evictable_size(self._priority(priority))

    def match_prefix(self, token_ids: TokenSeq) -> CachedPrefix:
        match = self._policy.peek_prefix(_query(token_ids))
        return CachedPrefix(match.device_tokens, match.host_tokens)

    def policy_stats(self) -> PolicyStats:
        """The policy's accounting, its counters summed over every flush (gauges: live cache)."""
        live = self._policy.stats()
        if not self._retired:
            return live
        summed: dict[str, Any] = {
            name: getattr(live, name) + retired for name, retired in self._retired.items()
        }
        return replace(live, **summed)

    def stats(self) -> KVBackendStats:
        policy = self._policy
        totals = self.policy_stats()
        # One pass with the threshold inlined (`Priority.from_engine`): the engine asks for
        # stats after every generation, and two generator passes over the open sessions
        # were half of what a call cost.
        high_min = self._high_min
        pins_high = sum(1 for p in self._open.values() if p >= high_min)
        return KVBackendStats(
            capacity_tokens=self._config.device_capacity_tokens,
            used_tokens=policy.device_used_tokens,
            evictable_tokens=policy.evictable_size(Priority.LOW),  # headroom for low work
            host_capacity_tokens=self._config.host_capacity_tokens,
            host_used_tokens=policy.host_used_tokens,
            dropped_tokens=totals.dropped_tokens,
            demoted_tokens=totals.demoted_tokens,
            offloaded_tokens=totals.d2h_tokens,
            loaded_tokens=totals.h2d_tokens,
            device_hit_tokens=totals.device_hit_tokens,
            host_hit_tokens=totals.host_hit_tokens,
            miss_tokens=totals.miss_tokens,
            recomputed_tokens=totals.recomputed_tokens,
            offloads=totals.offloads,
            prefetches=totals.prefetches,
            prefetches_in_time=totals.prefetches_in_time,
            prefetches_late=totals.prefetches_late,
            pins_high=pins_high,
            pins_low=len(self._open) - pins_high,
        )

    # ---- a request's life -----------------------------------------------------------------

    def acquire(
        self, rid: str, token_ids: TokenSeq, priority: int, session_id: str
    ) -> CachedPrefix:
        if rid in self._holds:
            raise ValueError(f"request {rid!r} already holds KV; release it before acquiring again")
        session = session_id if session_id in self._open else None
        locked = self._policy.lock_prefix(_query(token_ids), session_id=session)
        match, receipt = locked.match, locked.receipt
        if receipt.locked_tokens != match.device_tokens:
            raise RuntimeError(
                f"kvcache locked {receipt.locked_tokens} tokens of a {match.device_tokens}-token "
                "device prefix; the policy broke its lock contract (a bug in kvcache)"
            )
        self._holds[rid] = _Hold(token_ids, match, receipt, self._priority(priority), session_id)
        return CachedPrefix(match.device_tokens, match.host_tokens)

    def load_back(self, rid: str) -> LoadBack:
        hold = self._hold(rid)
        host_tokens = hold.matched - hold.pos
        if host_tokens == 0:
            return LoadBack(0)
        policy = self._policy
        room = policy.free_device_tokens + policy.evictable_size(hold.priority)
        if room < host_tokens:  # refused before the lookup is counted: it will be retried
            return LoadBack(0, host_tokens - room)
        self._count(hold)
        prefix = TokenPrefix(hold.ids, hold.matched)
        result = policy.load_back(prefix, hold.priority, self._clock.now(), relock=hold.receipt)
        if result.eviction is not None:
            self._note_eviction(result.eviction)
        if not result.ok:
            return LoadBack(0, max(1, result.shortfall_tokens))
        if result.loaded_tokens != host_tokens:
            raise RuntimeError(
                f"request {rid!r} matched {host_tokens} host tokens at acquire but "
                f"{result.loaded_tokens} were loaded; call load_back right after acquire"
            )
        self._adopt_lock(rid, hold, result.receipt, len(prefix))
        return LoadBack(result.loaded_tokens)

    def reserve(self, rid: str, tokens: int, priority: int) -> int:
        return self.reserve_each((rid,), tokens, priority)

    def reserve_each(self, rids: Sequence[str], tokens: int, priority: int) -> int:
        holds = [self._hold(rid) for rid in rids]
        if tokens <= 0 or not holds:
            return 0
        for hold in holds:
            self._count(hold)
        total = tokens * len(holds)
        result = self._policy.reserve(total, self._priority(priority), self._clock.now())
        self._note_eviction(result)
        if not result.ok:
            return max(1, result.shortfall_tokens)
        for hold in holds:
            hold.private += tokens
        return 0

    def unreserve_each(self, spare: Sequence[tuple[str, int]]) -> None:
        self._policy.release(give_back_each(spare, self._hold), self._clock.now())

    def unreserve(self, rid: str, tokens: int) -> None:
        self.unreserve_each(((rid, tokens),))

    def commit(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        hold = self._hold(rid)
        target = min(computed_tokens, len(token_ids)) // self._page * self._page
        if target <= hold.pos:
            return
        self._count(hold)
        prefix = TokenPrefix(token_ids, target)
        handed = min(hold.private, target - hold.pos)
        session = hold.session if hold.session in self._open else None
        result = self._policy.insert(
            prefix,
            self._clock.now(),
            reserved_tokens=handed,
            session_id=session,
            relock=hold.receipt,
        )
        hold.private -= handed
        self._adopt_lock(rid, hold, result.receipt, len(prefix))

    def release(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        self.commit(rid, token_ids, computed_tokens)
        hold = self._holds.pop(rid)
        now = self._clock.now()
        if hold.private:
            self._policy.release(hold.private, now)
        self._policy.unlock(hold.receipt)
        if self._flush_pending and not self._holds:
            self._rebuild()

    # ---- hints, hooks, transfers ----------------------------------------------------------

    def hint(self, hint: KVHint) -> None:
        now = self._clock.now()
        session = hint.session_id
        policy = self._policy
        if hint.kind == KVHintKind.OPEN and session in self._open:
            decisions = policy.set_priority(session, self._priority(hint.priority), now)
            self._open[session] = hint.priority
        elif hint.kind == KVHintKind.OPEN or session in self._open:
            decisions = apply_hint(policy, hint, now, high_priority_min=self._high_min)
            if hint.kind == KVHintKind.CLOSE:
                del self._open[session]
            elif hint.kind in (KVHintKind.OPEN, KVHintKind.SET_PRIORITY):
                self._open[session] = hint.priority
        else:
            self.ignored_hints += 1
            return
        self._take(decisions)

    def before_forward(self, demand_tokens: int) -> None:
        self._take(self._policy.before_forward(max(0, demand_tokens), self._clock.now()))

    def drain_transfers(self) -> tuple[Transfer, ...]:
        transfers = list(self._pending_h2d)
        if self._pending_d2h:
            transfers.insert(0, Transfer(TransferDirection.D2H, self._pending_d2h))
        self._pending_d2h = 0
        self._pending_h2d.clear()
        return tuple(transfers)

    def flush(self) -> None:
        if self._holds:
            self._flush_pending = True  # done when the last request leaves
        else:
            self._rebuild()

    def check_invariants(self) -> None:
        """Check the policy's cache and this adapter's books; AssertionError if broken (tests)."""
        policy = self._policy
        if isinstance(policy, CachePolicyBase):
            check_cache(policy.cache)
            reserved = policy.cache.reserved_tokens
            private = sum(hold.private for hold in self._holds.values())
            assert reserved == private, f"policy reserves {reserved} tokens, requests {private}"
        for rid, hold in self._holds.items():
            assert hold.pos % self._page == 0, f"{rid}: the locked prefix is not whole pages"
            assert hold.receipt.locked_tokens == hold.pos, f"{rid}: lock and position differ"
        assert policy.device_used_tokens <= self.capacity_tokens, "device KV exceeds capacity"

    # ---- internals ------------------------------------------------------------------------

    def _priority(self, engine_priority: int) -> Priority:
        return Priority.from_engine(engine_priority, self._high_min)

    def _hold(self, rid: str) -> _Hold:
        try:
            return self._holds[rid]
        except KeyError:
            raise ValueError(f"request {rid!r} holds no KV; call acquire() first") from None

    def _count(self, hold: _Hold) -> None:
        """Count the request's lookup in the policy's stats once, when it is admitted."""
        if hold.counted:
            return
        hold.counted = True
        session = hold.session if hold.session in self._open else None
        self._policy.count_lookup(hold.lookup, self._clock.now(), session_id=session)

    def _adopt_lock(
        self, rid: str, hold: _Hold, receipt: LockReceipt | None, prefix_tokens: int
    ) -> None:
        """Take the lock kvcache moved onto the request's `prefix_tokens` (now on device)."""
        locked = receipt.locked_tokens if receipt is not None else 0
        if receipt is None or locked != prefix_tokens:
            raise RuntimeError(
                f"kvcache moved the lock of request {rid!r} onto {locked} of the "
                f"{prefix_tokens} tokens it had just made device-resident (a bug in kvcache)"
            )
        hold.receipt = receipt
        hold.pos = prefix_tokens

    def _note_eviction(self, result: AllocationResult) -> None:
        self._pending_d2h += result.offloaded_tokens

    def _take(self, decisions: tuple[KVDecision, ...]) -> None:
        for decision in decisions:
            if isinstance(decision, OffloadDecision):
                self._pending_d2h += decision.offloaded_tokens
            elif isinstance(decision, PrefetchDecision):
                self._pending_h2d.append(
                    Transfer(TransferDirection.H2D, decision.tokens, decision.session_id)
                )

    def _rebuild(self) -> None:
        """Replace the policy by an empty one, keeping the counters and the open sessions."""
        old = self._policy.stats()
        for field in fields(PolicyStats):
            if field.name not in _GAUGES:
                self._retired[field.name] = self._retired.get(field.name, 0) + getattr(
                    old, field.name
                )
        self._policy = make_kv_policy(self._config, self._registry)
        self._flush_pending = False
        self.flushes += 1
        now = self._clock.now()
        for session, priority in self._open.items():
            self._take(self._policy.open(session, self._priority(priority), now))


def _query(token_ids: TokenSeq) -> TokenPrefix:
    """All but the last token (the engine always computes the last token itself), as a view:
    no copy, and the page keys the sequence carries stay usable."""
    return TokenPrefix(token_ids, max(0, len(token_ids) - 1))
