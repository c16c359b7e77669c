"""`FaultyEngine`: wrap any engine and make some of its `generate` calls fail, to test recovery.

Two faults, the two a fault-injection pass found fatal: a connection reset (a raw
`ConnectionResetError`, as a client library might leak it instead of an `EngineError`) and a hang
(the call never answers). Which calls fail is drawn from a seeded generator, so a failing run
replays. Off by default (`EngineFaultConfig()` injects nothing); `conductor run
engine_faults.reset_probability=0.1` turns it on.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from pydantic import Field

from foundation.config import FrozenConfig
from rollout.engines.base import Engine, EngineStats, GenerateRequest, GenerateResult, KVHint

__all__ = ["EngineFaultConfig", "FaultyEngine"]


class EngineFaultConfig(FrozenConfig):
    """Faults injected into `generate` calls (all off by default)."""

    reset_probability: float = Field(
        0.0, ge=0.0, le=1.0, description="chance a generate call raises ConnectionResetError"
    )
    hang_probability: float = Field(
        0.0, ge=0.0, le=1.0, description="chance a generate call never answers"
    )
    max_faults: int | None = Field(
        None, ge=0, description="stop injecting after this many faults (None: no limit)"
    )
    seed: int = Field(0, description="seed of the draws, so a failing run replays")

    @property
    def enabled(self) -> bool:
        return self.reset_probability > 0 or self.hang_probability > 0


class FaultyEngine:
    """An `Engine` that forwards everything to `inner`, failing some `generate` calls."""

    def __init__(self, inner: Engine, config: EngineFaultConfig) -> None:
        self._inner = inner
        self._config = config
        self._draw = random.Random(config.seed)
        self.name = inner.name
        self.resets = 0
        self.hangs = 0

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        fault = self._next_fault()
        if fault == "reset":
            self.resets += 1
            raise ConnectionResetError(f"injected: connection reset during {request.rid}")
        if fault == "hang":
            self.hangs += 1
            await asyncio.Event().wait()  # never set: only a timeout or a cancel ends it
        return await self._inner.generate(request)

    def _next_fault(self) -> str | None:
        config = self._config
        if config.max_faults is not None and self.resets + self.hangs >= config.max_faults:
            return None
        draw = self._draw.random()
        if draw < config.reset_probability:
            return "reset"
        if draw < config.reset_probability + config.hang_probability:
            return "hang"
        return None

    async def abort(self, rid: str) -> None:
        await self._inner.abort(rid)

    async def send_kv_hints(self, hints: Sequence[KVHint]) -> None:
        await self._inner.send_kv_hints(hints)

    async def pause(self) -> None:
        await self._inner.pause()

    async def resume(self) -> None:
        await self._inner.resume()

    async def update_weights(self, version: int, *, flush_cache: bool = True) -> None:
        await self._inner.update_weights(version, flush_cache=flush_cache)

    def stats(self) -> EngineStats:
        return self._inner.stats()

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def inner(self) -> Engine:
        """The engine the faults are injected into."""
        return self._inner
