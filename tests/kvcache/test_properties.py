"""Property tests: random operation sequences never break the cache's rules.

A hypothesis state machine drives a policy the way an engine would (sessions with hints,
requests that match/load back/lock/reserve/insert/unlock or abort, bare reservations, forward
steps) on a tiny cache with a 3-token vocabulary so prefixes collide constantly. After every
step `check_cache` recomputes all invariants: capacities, a valid radix tree, refs equal to
the live sessions covering each node, locks equal to the outstanding receipts. Individual rules
check the eviction guarantees against what they observed just before.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from kvcache import LockReceipt, Priority, make_kv_policy
from kvcache.checks import check_cache
from kvcache.errors import ReceiptError
from kvcache.policy_base import CachePolicyBase
from tests.kvcache.helpers import spec_config

SESSIONS = ("s0", "s1", "s2", "s3")
TOKENS = st.lists(st.integers(0, 2), min_size=1, max_size=4)
PRIORITIES = st.sampled_from([Priority.LOW, Priority.HIGH])
TOOL_SECONDS = st.sampled_from([12.0, 3.0, None, 0.2])  # hypothesis favours early entries
MAX_RUNNING = 2  # requests in flight at once (more would pin the tiny device with reservations)
MAX_CONTEXT_TOKENS = 14  # a longer session context restarts, to keep requests admissible


@dataclass
class Running:
    """A request holding a lock and a reservation."""

    session_id: str | None
    priority: Priority
    tokens: list[int]
    receipt: LockReceipt
    reserved_tokens: int


class CacheMachine(RuleBasedStateMachine):
    policy_name = "priority"

    def __init__(self) -> None:
        super().__init__()
        self.now_s = 0.0
        self.contexts: dict[str, list[int]] = {}  # live sessions and their latest context
        self.priorities: dict[str, Priority] = {}
        self.running: list[Running] = []

    @initialize(
        page_size=st.sampled_from([1, 2]),
        host_tokens=st.sampled_from([16, 6, 0]),
        offload_unreferenced=st.booleans(),
        reclaim_host_backups=st.booleans(),
    )
    def build(
        self,
        page_size: int,
        host_tokens: int,
        offload_unreferenced: bool,
        reclaim_host_backups: bool,
    ) -> None:
        config = spec_config(
            policy=self.policy_name,
            page_size=page_size,
            device_capacity_tokens=32,
            host_capacity_tokens=host_tokens,
            offload_unreferenced=offload_unreferenced,
            reclaim_host_backups=reclaim_host_backups,
            backoff_max_group=4,
            transfer={
                "bytes_per_token": 1,
                "d2h_bandwidth_bytes_per_s": 4.0,
                "h2d_bandwidth_bytes_per_s": 4.0,
                "latency_s": 0.0,
            },
        )
        policy = make_kv_policy(config)
        assert isinstance(policy, CachePolicyBase)
        self.policy = policy

    # ----------------------------------------------------------------- observation helpers
    def _tick(self, seconds: float = 0.25) -> float:
        self.now_s += seconds
        return self.now_s

    def _high_ref_paths(self) -> list[tuple[int, ...]]:
        cache = self.policy.cache
        return [
            cache.tree.path_tokens(node)
            for node in cache.tree.iter_nodes()
            if node.on_device and node.high_ref > 0
        ]

    def _locked_paths(self) -> list[tuple[int, ...]]:
        cache = self.policy.cache
        return [cache.tree.path_tokens(node) for node in cache.locked_nodes() if node.parent]

    def _all_on_device(self, paths: list[tuple[int, ...]]) -> bool:
        return all(self.policy.peek_prefix(path).device_tokens == len(path) for path in paths)

    def _idle(self, session_id: str) -> bool:
        return all(request.session_id != session_id for request in self.running)

    # ----------------------------------------------------------------- sessions
    def _pick(self, index: int, *, idle: bool = False) -> str:
        choices = sorted(sid for sid in self.contexts if not idle or self._idle(sid))
        return choices[index % len(choices)]

    def _has_open(self) -> bool:
        return bool(self.contexts)

    def _has_idle(self) -> bool:
        return any(self._idle(session_id) for session_id in self.contexts)

    @precondition(lambda self: len(self.contexts) < len(SESSIONS))
    @rule(priority=PRIORITIES)
    def open_session(self, priority: Priority) -> None:
        session_id = next(sid for sid in SESSIONS if sid not in self.contexts)
        self.policy.open(session_id, priority, self._tick())
        self.contexts[session_id] = []
        self.priorities[session_id] = priority

    @precondition(lambda self: self._has_idle())
    @rule(index=st.integers(0, 7))
    def close_session(self, index: int) -> None:
        session_id = self._pick(index, idle=True)
        self.policy.close(session_id, self._tick())
        del self.contexts[session_id], self.priorities[session_id]

    @precondition(lambda self: self._has_open())
    @rule(index=st.integers(0, 7), priority=PRIORITIES)
    def set_priority(self, index: int, priority: Priority) -> None:
        session_id = self._pick(index)
        self.policy.set_priority(session_id, priority, self._tick())
        self.priorities[session_id] = priority

    @precondition(lambda self: self._has_idle())
    @rule(index=st.integers(0, 7), expected_s=TOOL_SECONDS)
    def tool_wait(self, index: int, expected_s: float | None) -> None:
        self.tool_wait_session(self._pick(index, idle=True), expected_s)

    def tool_wait_session(self, session_id: str, expected_s: float | None) -> None:
        protected = self._high_ref_paths()
        locked = self._locked_paths()
        self.policy.tool_wait(session_id, expected_s, self._tick())
        assert self._all_on_device(locked)
        assert self._all_on_device(protected), "a tool wait evicted high-referenced KV"

    @precondition(lambda self: self._has_open())
    @rule(index=st.integers(0, 7))
    def tool_done(self, index: int) -> None:
        self.policy.tool_done(self._pick(index), self._tick())

    # ----------------------------------------------------------------- requests
    @rule(
        index=st.integers(0, 7),
        new_tokens=TOKENS,
        output=st.lists(st.integers(0, 2), max_size=2),
        expected_s=TOOL_SECONDS,
        new_session_priority=st.sampled_from([Priority.HIGH, Priority.LOW]),
    )
    def session_turn(
        self,
        index: int,
        new_tokens: list[int],
        output: list[int],
        expected_s: float | None,
        new_session_priority: Priority,
    ) -> None:
        """A whole agent turn: tool returns, request runs to completion, next tool starts."""
        if not self._has_idle():
            if len(self.contexts) == len(SESSIONS):
                return
            self.open_session(new_session_priority)
        session_id = self._pick(index, idle=True)
        self.policy.tool_done(session_id, self._tick())
        self.start_request(index=-1, new_tokens=new_tokens, priority=Priority.LOW, only=session_id)
        if self.running and self.running[-1].session_id == session_id:
            self.end_request(index=-1, output=output, aborted_early=False)
            self.tool_wait_session(session_id, expected_s)

    @precondition(lambda self: len(self.running) < MAX_RUNNING)
    @rule(index=st.integers(0, 7), new_tokens=TOKENS, priority=PRIORITIES, one_walk=st.booleans())
    def start_request(
        self,
        index: int,
        new_tokens: list[int],
        priority: Priority,
        only: str | None = None,
        one_walk: bool = False,
    ) -> None:
        idle = sorted(sid for sid in self.contexts if self._idle(sid))
        choices: list[str | None] = [*idle, None]
        session_id = only if only is not None else choices[index % len(choices)]
        if session_id is not None:
            priority = self.priorities[session_id]
            context = self.contexts[session_id]
            tokens = (context if len(context) < MAX_CONTEXT_TOKENS else []) + new_tokens
        else:
            tokens = new_tokens
        now_s = self._tick()
        match = self.policy.match_prefix(tokens, now_s, session_id=session_id)
        assert match.device_tokens + match.host_tokens + match.miss_tokens == len(tokens)
        if one_walk:  # the engine's order: lookup + lock, then load the host part under it
            peeked = self.policy.peek_prefix(tokens)
            locked = self.policy.lock_prefix(tokens, session_id=session_id)
            # With a session the walk may start at its context's end: it must find the same.
            assert locked.match == peeked, "lock_prefix must see what peek_prefix sees"
            receipt = locked.receipt
            assert receipt.locked_tokens == peeked.device_tokens
            if peeked.host_tokens:
                held = receipt
                loaded = self._guarded(
                    priority,
                    lambda: self.policy.load_back(tokens, priority, now_s, relock=held),
                )
                if loaded.ok:
                    assert loaded.receipt is not None
                    assert loaded.receipt.locked_tokens == peeked.device_tokens + peeked.host_tokens
                    receipt = loaded.receipt
                else:
                    assert loaded.receipt is None or loaded.receipt == held
                check_cache(self.policy.cache)
        else:
            if match.host_tokens:
                self._guarded(priority, lambda: self.policy.load_back(tokens, priority, now_s))
            receipt = self.policy.lock(tokens)
        need = len(tokens) - receipt.locked_tokens
        result = self._guarded(priority, lambda: self.policy.reserve(need, priority, now_s))
        if not result.ok:
            self.policy.unlock(receipt)  # the engine would preempt or wait
            return
        self.running.append(Running(session_id, priority, tokens, receipt, need))

    @precondition(lambda self: bool(self.running))
    @rule(
        index=st.integers(0, 7),
        output=st.lists(st.integers(0, 2), max_size=2),
        aborted_early=st.booleans(),
        move_lock=st.booleans(),
    )
    def end_request(
        self, index: int, output: list[int], aborted_early: bool, move_lock: bool = False
    ) -> None:
        request = self.running.pop(index % len(self.running))
        now_s = self._tick()
        if aborted_early:  # nothing is cached: the reservation goes back
            self.policy.release(request.reserved_tokens, now_s)
            self.policy.unlock(request.receipt)
            return
        # Output tokens need room too: reserve them like a decode step would, or give up on them.
        extra = self.policy.reserve(len(output), request.priority, now_s)
        tokens = request.tokens + (output if extra.ok else [])
        reserved = request.reserved_tokens + (len(output) if extra.ok else 0)
        if move_lock:  # the lock follows the cached tokens, then goes (a chunk, then the end)
            result = self.policy.insert(
                tokens,
                now_s,
                reserved_tokens=reserved,
                session_id=request.session_id,
                relock=request.receipt,
            )
            assert result.receipt is not None
            aligned = len(tokens) - len(tokens) % self.policy.config.page_size
            assert result.receipt.locked_tokens == aligned
            check_cache(self.policy.cache)
            with pytest.raises(ReceiptError):
                self.policy.unlock(request.receipt)  # moved: the old receipt is spent
            self.policy.unlock(result.receipt)
        else:
            self.policy.insert(
                tokens, now_s, reserved_tokens=reserved, session_id=request.session_id
            )
            self.policy.unlock(request.receipt)
        if request.session_id is not None:
            self.contexts[request.session_id] = tokens

    @rule(n_tokens=st.integers(0, 40), priority=PRIORITIES)
    def reserve_and_release(self, n_tokens: int, priority: Priority) -> None:
        now_s = self._tick()
        result = self._guarded(priority, lambda: self.policy.reserve(n_tokens, priority, now_s))
        if result.ok:
            self.policy.release(n_tokens, now_s)

    @rule(extra_tokens=st.integers(-2, 2), priority=PRIORITIES)
    def reserve_at_the_limit(self, extra_tokens: int, priority: Priority) -> None:
        """Ask for about everything the requester may take: the boundary of the shortfall."""
        n_tokens = max(
            0, self.policy.free_device_tokens + self.policy.evictable_size(priority) + extra_tokens
        )
        self.reserve_and_release(n_tokens, priority)

    @rule(demand=st.integers(0, 40), seconds=st.sampled_from([5.0, 1.0, 0.1]))
    def forward_step(self, demand: int, seconds: float) -> None:
        protected = self._high_ref_paths()
        locked = self._locked_paths()
        self.policy.before_forward(demand, self._tick(seconds))
        assert self._all_on_device(locked), "a forward step evicted locked KV"
        assert self._all_on_device(protected), "a forward step evicted high-referenced KV"

    def _guarded(self, priority: Priority, operation):  # type: ignore[no-untyped-def]
        """Run an evicting operation and check the eviction guarantees around it."""
        free = self.policy.free_device_tokens
        evictable = self.policy.evictable_size(priority)
        used = self.policy.device_used_tokens
        protected = self._high_ref_paths() if priority is Priority.LOW else []
        locked = self._locked_paths()
        result = operation()
        assert self._all_on_device(locked), "locked KV was evicted"
        if self.policy_name == "priority":
            assert self._all_on_device(protected), "a low request evicted high-referenced KV"
        requested = getattr(result, "requested_tokens", None)
        if requested is not None:
            if result.ok:
                assert free + result.freed_tokens >= requested, "eviction freed too little"
            else:
                assert result.shortfall_tokens == requested - free - evictable
                assert self.policy.device_used_tokens == used, "a failed reserve evicted KV"
        return result

    # ----------------------------------------------------------------- invariants
    @invariant()
    def cache_is_consistent(self) -> None:
        if hasattr(self, "policy"):
            check_cache(self.policy.cache)

    @invariant()
    def session_refs_follow_the_live_sessions(self) -> None:
        if not hasattr(self, "policy"):
            return
        cache = self.policy.cache
        refs = cache.session_refs()
        for session_id, (leaf, priority) in refs.items():
            assert session_id in self.contexts, f"closed session {session_id} still holds refs"
            if self.policy_name == "priority":
                assert priority is self.priorities[session_id]
            path = cache.tree.path_tokens(leaf)
            assert tuple(self.contexts[session_id][: len(path)]) == path
        if self.policy_name == "lru":
            assert refs == {}
        else:
            cached = {session_id for session_id, context in self.contexts.items() if context}
            assert cached <= refs.keys(), "a live session lost its refs"


class LRUCacheMachine(CacheMachine):
    policy_name = "lru"


_SETTINGS = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPriorityPolicyProperties = CacheMachine.TestCase
TestPriorityPolicyProperties.settings = _SETTINGS
TestLRUPolicyProperties = LRUCacheMachine.TestCase
TestLRUPolicyProperties.settings = _SETTINGS
