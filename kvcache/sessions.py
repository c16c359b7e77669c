"""Live agent sessions as the KV policy tracks them: priority, phase and tool-wait timing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from kvcache.errors import SessionError
from kvcache.types import Priority

__all__ = ["SessionPhase", "SessionState", "SessionTable"]


class SessionPhase(StrEnum):
    """Where a session is between hints."""

    ACTIVE = "active"  # generating, or waiting for a generation slot
    TOOL_WAIT = "tool_wait"  # its tool runs; the next turn comes at `tool_return_s`


@dataclass(slots=True)
class SessionState:
    """One live session. `tool_return_s` is None when the tool's duration is unknown."""

    session_id: str
    priority: Priority
    phase: SessionPhase = SessionPhase.ACTIVE
    context_tokens: int = 0  # tokens of its latest context (what a next turn would reuse)
    tool_started_s: float | None = None
    tool_return_s: float | None = None
    offloaded: bool = False  # its KV went to host during the current tool wait
    prefetch_ready_s: float | None = None  # a prefetch for the current wait lands then
    prefetch_seq: int = -1  # live entry in the policy's prefetch queue (-1: none)


class SessionTable:
    """Open sessions by id; unknown or duplicate ids are caller bugs and raise `SessionError`."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionState] = {}

    def open(self, session_id: str, priority: Priority) -> SessionState:
        if session_id in self._sessions:
            raise SessionError(
                f"session {session_id!r} is already open; close it first or use a fresh id"
            )
        state = SessionState(session_id, priority)
        self._sessions[session_id] = state
        return state

    def get(self, session_id: str) -> SessionState:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionError(
                f"session {session_id!r} is not open; send an `open` hint before using it"
            ) from None

    def close(self, session_id: str) -> SessionState:
        state = self.get(session_id)
        del self._sessions[session_id]
        return state

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[SessionState]:
        return iter(self._sessions.values())
