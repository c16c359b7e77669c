"""`PriorityKVPolicy`: session-referenced, priority-aware eviction with proactive offload/prefetch.

What it adds to the shared request path (DESIGN.md §3):

- Every live session references its latest context root to leaf: `high_ref` for high-priority
  sessions, `low_ref` for low. Eviction takes unreferenced KV first (dropped), then low-referenced
  KV (offloaded if the host has room, else dropped), and high-referenced KV only for a
  high-priority requester; `evictable_size` counts only what the requester may take.
- `tool_wait` of a low-priority session offloads its exclusive KV at once, unless the tool is
  predicted to return before the round trip pays off; a prefetch is queued to start one reload
  time (plus a margin) before the predicted return. High-priority sessions stay on device.
- `before_forward` starts due prefetches that fit beside the predicted demand, then, if the
  demand exceeds what the device can give without touching session KV, offloads a group of
  tool-waiting low-priority sessions (latest return first), doubling the group while the
  pressure lasts and halving it after. When a high-priority session closes, the backoff resets
  and queued prefetches are reconsidered.
"""

from __future__ import annotations

import heapq
import itertools
import math

from kvcache.backoff import GroupBackoff
from kvcache.cache import TierRules
from kvcache.config import KVCacheConfig
from kvcache.eviction_order import EvictionClass, max_evictable_class
from kvcache.policy_base import CachePolicyBase
from kvcache.sessions import SessionPhase, SessionState
from kvcache.transfer import Direction
from kvcache.tree import TreeNode
from kvcache.types import (
    KVDecision,
    OffloadDecision,
    OffloadReason,
    PrefetchDecision,
    Priority,
)

__all__ = ["PriorityKVPolicy"]

# Rebuild the pressure-candidate heap when stale entries outnumber live ones this many times
# over (amortised O(1) per push; bounds memory in long runs).
_STALE_FACTOR = 2
_STALE_SLACK = 64


class PriorityKVPolicy(CachePolicyBase):
    """Our policy: refs by priority, tool-wait offload, timed prefetch, pressure backoff."""

    name = "priority"

    def __init__(self, config: KVCacheConfig) -> None:
        rules = TierRules(
            offload_min_class=(
                EvictionClass.UNREFERENCED if config.offload_unreferenced else EvictionClass.LOW_REF
            ),
            strict_host_reclaim=True,
            reclaim_backups=config.reclaim_host_backups,
        )
        super().__init__(config, rules)
        self._backoff = GroupBackoff.start(config.backoff_initial_group, config.backoff_max_group)
        self._prefetch_queue: list[tuple[float, int, str]] = []  # (due_s, seq, session_id)
        self._prefetch_seq = itertools.count()
        # Tool-waiting low-priority sessions that may still hold device KV, latest return first:
        # (-return_s, seq, session_id); an entry is live while it matches `_pressure_seq`.
        self._pressure_heap: list[tuple[float, int, str]] = []
        self._pressure_seq: dict[str, int] = {}
        self._last_demand_tokens = 0

    @property
    def backoff_group_size(self) -> int:
        """Sessions the next pressured step will offload."""
        return self._backoff.group_size

    def _max_class(self, requester_priority: Priority) -> EvictionClass:
        return max_evictable_class(requester_priority)

    def _on_session_context(self, state: SessionState, leaf: TreeNode) -> None:
        self._cache.set_session(state.session_id, state.priority, leaf)

    def _after_eviction(self, now_s: float) -> None:
        # Eviction offloaded the KV of these sessions; a tool-waiting one gets its prefetch
        # queued as if the policy had offloaded it.
        for session_id in self._cache.take_offloaded_sessions():
            if session_id not in self._sessions:
                continue
            state = self._sessions.get(session_id)
            if state.phase is SessionPhase.TOOL_WAIT and not state.offloaded:
                state.offloaded = True
                state.prefetch_ready_s = None
                self._queue_prefetch_before_return(state)

    # ----------------------------------------------------------------- hints
    def open(self, session_id: str, priority: Priority, now_s: float) -> tuple[KVDecision, ...]:
        self._sessions.open(session_id, priority)
        return ()

    def set_priority(
        self, session_id: str, priority: Priority, now_s: float
    ) -> tuple[KVDecision, ...]:
        state = self._sessions.get(session_id)
        if state.priority is priority:
            return ()
        state.priority = priority
        leaf = self._cache.session_leaf(session_id)
        if leaf is not None:
            self._cache.set_session(session_id, priority, leaf)
        if state.phase is not SessionPhase.TOOL_WAIT:
            return ()
        if priority is Priority.LOW:
            decisions: tuple[KVDecision, ...] = ()
            if not state.offloaded and self._config.tool_wait_offload:
                decisions = self._offload_for_tool_wait(state, now_s, OffloadReason.PRIORITY_CHANGE)
            self._track_pressure(state)
            return decisions
        self._pressure_seq.pop(session_id, None)
        if not state.offloaded:
            return ()
        # It became critical while its KV sits on host: bring it back as soon as it fits.
        self._queue_prefetch(state, due_s=now_s)
        return self._run_prefetches(now_s, self._last_demand_tokens)

    def tool_wait(
        self, session_id: str, expected_s: float | None, now_s: float
    ) -> tuple[KVDecision, ...]:
        if expected_s is not None and (expected_s < 0 or math.isnan(expected_s)):
            raise ValueError(f"expected_s must be a non-negative duration, got {expected_s}")
        state = self._sessions.get(session_id)
        state.phase = SessionPhase.TOOL_WAIT
        state.tool_started_s = now_s
        state.tool_return_s = None if expected_s is None else now_s + expected_s
        state.offloaded = False
        state.prefetch_ready_s = None
        state.prefetch_seq = -1
        if state.priority is Priority.HIGH and not self._config.tool_wait_offload_high:
            return ()  # critical sessions keep their KV on device while the tool runs
        decisions: tuple[KVDecision, ...] = ()
        if self._config.tool_wait_offload:
            decisions = self._offload_for_tool_wait(state, now_s, OffloadReason.TOOL_WAIT)
        self._track_pressure(state)
        return decisions

    def tool_done(self, session_id: str, now_s: float) -> tuple[KVDecision, ...]:
        state = self._sessions.get(session_id)
        if state.phase is SessionPhase.TOOL_WAIT:
            if state.prefetch_ready_s is not None:
                if now_s >= state.prefetch_ready_s:
                    self._accounting.prefetches_in_time += 1
                else:
                    self._accounting.prefetches_late += 1
            elif state.offloaded:
                self._accounting.returns_without_prefetch += 1
        state.phase = SessionPhase.ACTIVE
        state.tool_started_s = state.tool_return_s = None
        state.offloaded = False
        state.prefetch_ready_s = None
        state.prefetch_seq = -1  # drops any queued prefetch
        self._pressure_seq.pop(session_id, None)
        return ()

    def close(self, session_id: str, now_s: float) -> tuple[KVDecision, ...]:
        state = self._sessions.close(session_id)
        self._cache.remove_session(session_id)
        self._pressure_seq.pop(session_id, None)
        state.prefetch_seq = -1
        self._record(now_s)
        if state.priority is not Priority.HIGH:
            return ()
        # A critical session finished: its KV became ordinary cache; start over gently and see
        # whether queued prefetches fit now.
        self._backoff = self._backoff.reset()
        return self._run_prefetches(now_s, self._last_demand_tokens)

    # ----------------------------------------------------------------- forward steps
    def before_forward(self, predicted_demand_tokens: int, now_s: float) -> tuple[KVDecision, ...]:
        if predicted_demand_tokens < 0:
            raise ValueError(
                f"predicted_demand_tokens must be non-negative, got {predicted_demand_tokens}"
            )
        self._last_demand_tokens = predicted_demand_tokens
        decisions = self._run_prefetches(now_s, predicted_demand_tokens)
        decisions += self._relieve_pressure(predicted_demand_tokens, now_s)
        self._record(now_s)
        return decisions

    def _relieve_pressure(self, demand_tokens: int, now_s: float) -> tuple[KVDecision, ...]:
        # Unreferenced cache is given up before any session's KV, so it counts as available.
        available = self._cache.free_device_tokens + self._cache.evictable_tokens(
            EvictionClass.UNREFERENCED
        )
        shortage = demand_tokens - available
        pressured = shortage > 0
        group = self._backoff.group_size
        self._backoff = self._backoff.after_step(pressured=pressured)
        if not pressured:
            return ()
        decisions: list[KVDecision] = []
        keep: list[SessionState] = []  # still hold device KV: stay candidates
        freed = 0
        heap = self._pressure_heap
        while heap and len(decisions) < group and freed < shortage:
            _, seq, session_id = heapq.heappop(heap)
            if self._pressure_seq.get(session_id) != seq:
                continue  # stale: the tool returned, the session closed or became critical
            del self._pressure_seq[session_id]
            state = self._sessions.get(session_id)
            decision = self._offload_session(state, now_s, OffloadReason.PRESSURE)
            if decision is None:
                if self._exclusive_device_tokens(state):
                    keep.append(state)  # the host is full for it: later steps may retry
                    break
                continue
            decisions.append(decision)
            freed += decision.offloaded_tokens + decision.demoted_tokens
            if self._exclusive_device_tokens(state):
                keep.append(state)
        for state in keep:
            self._track_pressure(state)
        return tuple(decisions)

    def _track_pressure(self, state: SessionState) -> None:
        """Make a tool-waiting low session a pressure-offload candidate if it holds device KV."""
        if (
            state.phase is not SessionPhase.TOOL_WAIT
            or state.priority is not Priority.LOW
            or not self._exclusive_device_tokens(state)
        ):
            return
        seq = next(self._prefetch_seq)
        self._pressure_seq[state.session_id] = seq
        heapq.heappush(self._pressure_heap, (self._pressure_key(state), seq, state.session_id))
        if len(self._pressure_heap) > _STALE_FACTOR * len(self._pressure_seq) + _STALE_SLACK:
            self._pressure_heap = [
                (self._pressure_key(self._sessions.get(session_id)), seq, session_id)
                for session_id, seq in self._pressure_seq.items()
            ]
            heapq.heapify(self._pressure_heap)

    @staticmethod
    def _pressure_key(state: SessionState) -> float:
        """Latest predicted return first; an unknown return counts as latest of all."""
        return -(math.inf if state.tool_return_s is None else state.tool_return_s)

    def _exclusive_device_tokens(self, state: SessionState) -> int:
        leaf = self._cache.session_leaf(state.session_id)
        return 0 if leaf is None else self._cache.exclusive_device_tokens(leaf)

    # ----------------------------------------------------------------- offload
    def _offload_for_tool_wait(
        self, state: SessionState, now_s: float, reason: OffloadReason
    ) -> tuple[KVDecision, ...]:
        leaf = self._cache.session_leaf(state.session_id)
        if leaf is None:
            return ()
        tokens = self._cache.exclusive_device_tokens(leaf)
        if tokens == 0:
            return ()
        remaining_s = math.inf if state.tool_return_s is None else state.tool_return_s - now_s
        if remaining_s <= self._transfer.round_trip_s(tokens) + self._config.prefetch_margin_s:
            return ()  # back before the round trip pays off: keep it on device
        decision = self._offload_session(state, now_s, reason)
        return () if decision is None else (decision,)

    def _offload_session(
        self, state: SessionState, now_s: float, reason: OffloadReason
    ) -> OffloadDecision | None:
        leaf = self._cache.session_leaf(state.session_id)
        if leaf is None:
            return None
        offloaded, demoted = self._cache.offload_exclusive(leaf)
        self._cache.take_offloaded_sessions()  # this one is handled right here
        if offloaded + demoted == 0:
            return None
        state.offloaded = True
        state.prefetch_ready_s = None
        self._queue_prefetch_before_return(state)
        return OffloadDecision(
            session_id=state.session_id,
            offloaded_tokens=offloaded,
            demoted_tokens=demoted,
            transfer_s=self._transfer.seconds(offloaded, Direction.D2H),
            reason=reason,
        )

    # ----------------------------------------------------------------- prefetch
    def _queue_prefetch_before_return(self, state: SessionState) -> None:
        """Queue a prefetch one reload time plus the margin before the predicted return."""
        leaf = self._cache.session_leaf(state.session_id)
        if state.tool_return_s is None or leaf is None:
            return  # unknown return: the next turn loads its KV back on demand
        host_tokens = sum(node.tokens for node in self._cache.session_host_chain(leaf))
        reload_s = self._transfer.seconds(host_tokens, Direction.H2D)
        self._queue_prefetch(
            state, due_s=state.tool_return_s - reload_s - self._config.prefetch_margin_s
        )

    def _queue_prefetch(self, state: SessionState, *, due_s: float) -> None:
        state.prefetch_seq = seq = next(self._prefetch_seq)
        heapq.heappush(self._prefetch_queue, (due_s, seq, state.session_id))

    def _run_prefetches(self, now_s: float, demand_tokens: int) -> tuple[KVDecision, ...]:
        """Start due prefetches, earliest due first, until one does not fit beside the demand.

        The one that does not fit stays at the head of the queue for the next step, so a step
        costs one failed attempt at most however many prefetches are waiting.
        """
        decisions: list[KVDecision] = []
        queue = self._prefetch_queue
        while queue and queue[0][0] <= now_s:
            _, seq, session_id = queue[0]
            state = self._sessions.get(session_id) if session_id in self._sessions else None
            if (
                state is None
                or state.prefetch_seq != seq
                or state.phase is not SessionPhase.TOOL_WAIT
            ):
                heapq.heappop(queue)  # stale: the tool returned or the session closed
                continue
            decision = self._try_prefetch(state, now_s, demand_tokens)
            if decision is None and state.prefetch_seq == seq:
                break  # no room yet
            heapq.heappop(queue)
            if decision is not None:
                decisions.append(decision)
        return tuple(decisions)

    def _try_prefetch(
        self, state: SessionState, now_s: float, demand_tokens: int
    ) -> PrefetchDecision | None:
        leaf = self._cache.session_leaf(state.session_id)
        chain = self._cache.session_host_chain(leaf) if leaf is not None else []
        tokens = sum(node.tokens for node in chain)
        if tokens == 0:
            state.prefetch_seq = -1  # nothing left on host (dropped or already back)
            return None
        may_evict = (
            EvictionClass.UNREFERENCED if self._config.prefetch_evicts_unreferenced else None
        )
        room = (
            self._cache.free_device_tokens + self._cache.evictable_tokens(may_evict) - demand_tokens
        )
        if room < tokens:
            return None
        transfer_s = self._transfer.seconds(tokens, Direction.H2D)
        outcome = self._cache.load_chain(chain, may_evict, now_s, now_s + transfer_s)
        if not outcome.ok:
            return None
        state.prefetch_seq = -1
        state.prefetch_ready_s = now_s + transfer_s
        self._track_pressure(state)  # back on device while its tool still runs
        self._accounting.prefetches += 1
        self._accounting.prefetched_tokens += tokens
        return PrefetchDecision(
            session_id=state.session_id,
            tokens=tokens,
            transfer_s=transfer_s,
            ready_at_s=now_s + transfer_s,
        )
