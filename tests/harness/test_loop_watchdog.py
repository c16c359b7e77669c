"""The loop watchdog records every stall of the event loop with the stack that held it."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from foundation.clock import LoopClock
from harness.events import EventBus, EventRecorder, Phase
from harness.loop_watchdog import LoopWatchdog, LoopWatchdogConfig


def _hold_the_loop(seconds: float) -> None:
    """Agent-sized work done on the loop thread (what the watchdog must catch)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


async def _watched(config: LoopWatchdogConfig, body: object) -> EventRecorder:
    bus, recorder = EventBus(), EventRecorder()
    bus.subscribe(recorder)
    watchdog = LoopWatchdog(config, bus, LoopClock()).start()
    try:
        await body  # type: ignore[misc]
        await asyncio.sleep(0.1)  # the heartbeat after the stall reports it
    finally:
        watchdog.stop()
    return recorder


async def test_a_stall_is_recorded_with_its_length_and_the_stack_that_held_the_loop() -> None:
    async def stall() -> None:
        await asyncio.sleep(0.1)
        _hold_the_loop(0.4)

    recorder = await _watched(LoopWatchdogConfig(stall_threshold_s=0.1), stall())
    [event] = recorder.of_phase(Phase.LOOP_STALL)
    assert 0.3 <= event.data["stall_s"] <= 1.0
    assert event.duration_s == pytest.approx(event.data["stall_s"], abs=0.01)
    assert "_hold_the_loop" in event.data["where"]
    assert any("in stall" in frame for frame in event.data["stack"])
    assert event.sample_id == ""


async def test_a_loop_that_keeps_answering_records_nothing() -> None:
    async def busy_but_fair() -> None:
        for _ in range(20):
            _hold_the_loop(0.01)
            await asyncio.sleep(0)

    # A threshold well above the machine's own hiccups (a shared, loaded machine can deschedule
    # the process for 100 ms); the loop yields every 10 ms.
    recorder = await _watched(LoopWatchdogConfig(stall_threshold_s=0.5), busy_but_fair())
    assert recorder.of_phase(Phase.LOOP_STALL) == []


async def test_stall_warnings_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    async def three_stalls() -> None:
        for _ in range(3):
            _hold_the_loop(0.2)
            await asyncio.sleep(0.1)

    config = LoopWatchdogConfig(stall_threshold_s=0.05, warning_interval_s=60)
    with caplog.at_level(logging.WARNING, logger="harness.loop_watchdog"):
        recorder = await _watched(config, three_stalls())
    assert len(recorder.of_phase(Phase.LOOP_STALL)) >= 3  # (a loaded machine may add some)
    warnings = [r for r in caplog.records if "event loop was stalled" in r.getMessage()]
    assert len(warnings) == 1


async def test_a_disabled_watchdog_starts_no_thread() -> None:
    watchdog = LoopWatchdog(LoopWatchdogConfig(enabled=False), EventBus(), LoopClock()).start()
    assert watchdog._thread is None
    watchdog.stop()
