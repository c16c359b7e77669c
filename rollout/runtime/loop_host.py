"""The seam between an agent loop and its conductor: `LoopHost`, and what crosses it.

An `AgentLoop` reports scheduler events and turn boundaries to its host and waits on it for
`GenerationTicket`s; the `Conductor` is the production host, tests use a recording one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from foundation.clock import Clock
from harness.events import EventBus
from rollout.core.scheduler_events import SchedulerEvent
from rollout.core.types import SampleProgress
from rollout.engines.base import Engine, GenerateRequest, GenerateResult

__all__ = ["GenerationTicket", "LoopHost"]


@dataclass(slots=True)
class GenerationTicket:
    """One `StartGeneration` with its request id; the conductor flags it when it preempts.

    `hold`: set by a deadline cancel; the loop keeps the aborted generation's slot and waits
    until the event is set (or it is truncated) before it asks for the next one.
    """

    sample_id: str
    engine: str
    rid: str
    high: bool
    resume: bool = False
    abort_requested: bool = False
    abort_reason: str = ""
    hold: asyncio.Event | None = None


class LoopHost(Protocol):
    """What an agent loop needs from its conductor."""

    @property
    def clock(self) -> Clock: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def kv_hints(self) -> bool:
        """Whether to send KV session hints."""
        ...

    def report(self, event: SchedulerEvent) -> None:
        """Feed a scheduler event (its decisions are carried out by the host)."""
        ...

    async def next_generation(self, sample_id: str) -> GenerationTicket:
        """Wait for the scheduler to give the sample a generation slot."""
        ...

    def engine(self, name: str) -> Engine: ...

    def is_critical(self, group_id: str) -> bool: ...

    def generation_done(
        self,
        engine: str,
        request: GenerateRequest,
        result: GenerateResult,
        *,
        computed_prefix_tokens: int,
        sample_id: str = "",
        prefix_from_older_weights: bool = False,
    ) -> None:
        """A `generate` call returned: refresh engine stats, count cache hits and recompute
        (apart, what older weights computed: a weight update lost it), and track `sample_id`'s
        context length (the live-KV gate reads it)."""
        ...

    def turn_boundary(self, progress: SampleProgress) -> None:
        """A turn ended and the next has not begun: predict, recompute priorities."""
        ...

    def expected_tool_s(self, tool: str | None) -> float: ...

    def tool_wait_hinted(
        self, sample_id: str, engine: str, *, high: bool, tool: str | None, expected_s: float
    ) -> None:
        """The loop told `engine`'s KV manager that the sample waits `expected_s` for `tool`:
        the offload decision (the manager offloads the session's KV if the wait outlasts the
        host round trip). Recorded in the decision log."""
        ...

    def tool_observed(self, tool: str | None, seconds: float) -> None: ...
