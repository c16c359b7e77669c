"""The session-hint protocol shared by the rollout layer, the sim engine and the SGLang plugin.

A session is one agent sample's conversation. Its life as hints: `open` (with a priority),
any number of `set_priority`, then per turn `tool_wait(expected_s)` when the turn ends and a
tool starts and `tool_done` when it returns, and finally `close`. While open, the session holds a
reference (`high_ref` or `low_ref`) on every node of its latest cached context, root to leaf.

The kinds mirror `rollout.engines.base.KVHintKind` value for value, so an engine forwards the
rollout layer's `KVHint` objects with `apply_hint` without this package importing `rollout`.
Every hint returns the transfers it decided (possibly none) for the engine to carry out.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol, runtime_checkable

from kvcache.types import KVDecision, Priority

__all__ = ["HintKind", "HintLike", "KVSessionHints", "apply_hint"]


class HintKind(StrEnum):
    """What a hint says about a session (same values as the engine protocol's `KVHintKind`)."""

    OPEN = "open"
    SET_PRIORITY = "set_priority"
    TOOL_WAIT = "tool_wait"
    TOOL_DONE = "tool_done"
    CLOSE = "close"


class HintLike(Protocol):
    """Anything shaped like `rollout.engines.base.KVHint`."""

    @property
    def kind(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def priority(self) -> int: ...

    @property
    def expected_s(self) -> float | None: ...


@runtime_checkable
class KVSessionHints(Protocol):
    """The receiving side of session hints. `now_s` is the caller's clock; nothing reads time."""

    def open(self, session_id: str, priority: Priority, now_s: float) -> tuple[KVDecision, ...]:
        """Start tracking a session; it references nothing until its first `insert`."""
        ...

    def set_priority(
        self, session_id: str, priority: Priority, now_s: float
    ) -> tuple[KVDecision, ...]:
        """Move the session's refs to the new priority (its group became (non-)critical)."""
        ...

    def tool_wait(
        self, session_id: str, expected_s: float | None, now_s: float
    ) -> tuple[KVDecision, ...]:
        """The session's turn ended and a tool runs for about `expected_s` (None: unknown)."""
        ...

    def tool_done(self, session_id: str, now_s: float) -> tuple[KVDecision, ...]:
        """The tool returned; the session's next turn comes soon."""
        ...

    def close(self, session_id: str, now_s: float) -> tuple[KVDecision, ...]:
        """The sample finished; drop its refs (its KV stays as ordinary, unreferenced cache)."""
        ...


def apply_hint(
    target: KVSessionHints, hint: HintLike, now_s: float, *, high_priority_min: int
) -> tuple[KVDecision, ...]:
    """Dispatch one engine-level hint to `target`, mapping its integer priority to LOW/HIGH.

    Raises ValueError for an unknown kind (the message lists the known ones).
    """
    try:
        kind = HintKind(hint.kind)
    except ValueError:
        known = ", ".join(k.value for k in HintKind)
        raise ValueError(f"unknown KV hint kind {hint.kind!r}; expected one of: {known}") from None
    if kind is HintKind.OPEN:
        priority = Priority.from_engine(hint.priority, high_priority_min)
        return target.open(hint.session_id, priority, now_s)
    if kind is HintKind.SET_PRIORITY:
        priority = Priority.from_engine(hint.priority, high_priority_min)
        return target.set_priority(hint.session_id, priority, now_s)
    if kind is HintKind.TOOL_WAIT:
        return target.tool_wait(hint.session_id, hint.expected_s, now_s)
    if kind is HintKind.TOOL_DONE:
        return target.tool_done(hint.session_id, now_s)
    return target.close(hint.session_id, now_s)
