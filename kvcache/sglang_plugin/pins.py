"""Which sessions' KV the agentkv cache pins in device memory: the pure decisions.

A *pin* is a real lock on the node that ends a session's cached context, held between its
turns, so the KV stays on the device while its tool runs and SGLang's admission accounting
counts it as protected (never as evictable KV the scheduler could plan on). Rules:

* a high-priority session (its request priority >= `high_priority_min`: its group is
  critical) is pinned at the end of each turn, on the node its context now ends at;
* a low-priority session holds no pin: its KV is offloaded to host by the cache (with HiCache)
  or is ordinary cache, evicted under pressure, before any pinned KV;
* pinned tokens stay within `budget_tokens`; a high session's turn that would exceed it
  unpins the least recently pinned *other* high sessions first, so high KV is only ever given
  up for another high session, never for a low one;
* `close` unpins; `set_priority` to low unpins, to high pins at the next turn's end;
* a pin not renewed by a turn within `ttl_s` is released (`expire`): a session whose `close`
  never arrived must not hold device KV for ever.

No SGLang here: the cache (`kvcache.sglang_plugin.cache`) turns the actions into locks.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["Pin", "SessionPins", "Unpin"]


@dataclass(frozen=True, slots=True)
class Pin:
    """Lock `node` for `session` (then release the session's previous pin, if any)."""

    session_id: str
    node: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Unpin:
    """Release the session's pin."""

    session_id: str


Action = Pin | Unpin


class SessionPins:
    """The pinned sessions, least recently pinned first (see the module docstring)."""

    def __init__(self, *, high_priority_min: int, budget_tokens: int, ttl_s: float) -> None:
        if budget_tokens < 0 or ttl_s <= 0:
            raise ValueError(f"need budget_tokens >= 0 and ttl_s > 0, got {budget_tokens}, {ttl_s}")
        self._high_priority_min = high_priority_min
        self._budget_tokens = budget_tokens
        self._ttl_s = ttl_s
        self._pinned: OrderedDict[str, int] = OrderedDict()  # session -> pinned tokens
        self._pinned_at: dict[str, float] = {}

    @property
    def pinned(self) -> dict[str, int]:
        """Pinned sessions and their tokens, least recently pinned first."""
        return dict(self._pinned)

    @property
    def pinned_tokens(self) -> int:
        return sum(self._pinned.values())

    def is_high(self, priority: int) -> bool:
        return priority >= self._high_priority_min

    def turn_ended(
        self, session_id: str, priority: int, node: int, tokens: int, now_s: float
    ) -> list[Action]:
        """A session's turn was cached up to `node` (`tokens` long, root to node)."""
        if not self.is_high(priority) or tokens > self._budget_tokens:
            return self._unpin(session_id)  # low, or too long to pin at all: ordinary cache
        actions: list[Action] = []
        self._pinned.pop(session_id, None)  # re-pinned below, as the most recent
        used = self.pinned_tokens
        while used + tokens > self._budget_tokens and self._pinned:
            victim, victim_tokens = next(iter(self._pinned.items()))
            actions += self._unpin(victim)
            used -= victim_tokens
        self._pinned[session_id] = tokens
        self._pinned_at[session_id] = now_s
        actions.append(Pin(session_id, node, tokens))
        return actions

    def set_priority(self, session_id: str, priority: int) -> list[Action]:
        """The session's group became critical (or stopped being); low unpins at once."""
        return [] if self.is_high(priority) else self._unpin(session_id)

    def close(self, session_id: str) -> list[Action]:
        """The sample finished: its KV is ordinary cache from now on."""
        return self._unpin(session_id)

    def expire(self, now_s: float) -> list[Action]:
        """Release pins that no turn renewed within `ttl_s`."""
        stale = [s for s, at in self._pinned_at.items() if now_s - at > self._ttl_s]
        return [action for session in stale for action in self._unpin(session)]

    def _unpin(self, session_id: str) -> list[Action]:
        self._pinned_at.pop(session_id, None)
        if self._pinned.pop(session_id, None) is None:
            return []
        return [Unpin(session_id)]
