"""`LoopWatchdog`: notices when the event loop stops answering, and records what held it.

Everything a run does shares one event-loop thread, so one slow piece of work (issue 28: an
editor call that took 11 s on a 1 MB file) freezes every sample, the engine client and the
signal handling. The watchdog makes such a stall visible instead of silent:

* a heartbeat callback on the loop runs every `stall_threshold_s / 4` and notes the time;
* a daemon thread checks the heartbeat; once it is half a threshold late, the thread takes
  the loop thread's stack (what is holding it, while it holds it);
* when the loop answers again, the heartbeat sees how late it ran and emits a `loop_stall`
  event (its duration and that stack) on the run's event bus, and logs a warning (at most one
  per `warning_interval_s`, with how many were left out) unless the loop sat idle in select():
  then no task held it (the process got no CPU, or another thread held the interpreter).

It costs a few callbacks per 100 ms on the loop and one sleeping thread.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType

from pydantic import Field

from foundation.clock import Clock
from foundation.config import FrozenConfig
from harness.events import EventBus, Phase, StepEvent

__all__ = ["LoopStallStats", "LoopWatchdog", "LoopWatchdogConfig"]

log = logging.getLogger(__name__)


class LoopWatchdogConfig(FrozenConfig):
    """How the run's event loop is watched (`watchdog` of a run config)."""

    enabled: bool = Field(True, description="watch the event loop for stalls")
    stall_threshold_s: float = Field(
        0.1,
        gt=0,
        description="a loop that runs no callback for longer than this is stalled: the stall "
        "is recorded with the stack that held it (s)",
    )
    warning_interval_s: float = Field(
        10.0, ge=0, description="at most one stall warning in the log per this long (s)"
    )
    stack_frames: int = Field(
        25, ge=1, description="innermost frames of the stalled stack kept in the event (frames)"
    )
    stop_timeout_s: float = Field(
        15.0,
        gt=0,
        description="after SIGTERM / SIGINT, how long the clean stop (aborting generations, "
        "removing containers, flushing files) may take before the process exits anyway "
        "(the next start reaps what is left) (s)",
    )


@dataclass(frozen=True, slots=True)
class LoopStallStats:
    """What the watchdog saw so far."""

    stalls: int
    longest_s: float
    total_s: float


class LoopWatchdog:
    """See the module docstring. `start()` it on the loop to watch, `stop()` it after."""

    def __init__(self, config: LoopWatchdogConfig, bus: EventBus, clock: Clock) -> None:
        self._config = config
        self._bus = bus
        self._clock = clock
        self._beat_interval_s = config.stall_threshold_s / 4
        self._lock = threading.Lock()
        self._last_beat = 0.0  # time.monotonic() of the latest heartbeat
        self._stack: list[str] | None = None  # taken by the thread during the current stall
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._stalls = 0
        self._longest_s = 0.0
        self._total_s = 0.0
        self._last_warning = -float("inf")
        self._unwarned = 0

    def start(self) -> LoopWatchdog:
        """Start watching the running loop (call from a coroutine on it). Idempotent."""
        if self._thread is not None or not self._config.enabled:
            return self
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._last_beat = time.monotonic()
        self._handle = self._loop.call_later(self._beat_interval_s, self._beat)
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; idempotent."""
        self._stopping.set()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=1.0)

    def stats(self) -> LoopStallStats:
        return LoopStallStats(self._stalls, self._longest_s, self._total_s)

    # -- on the loop ------------------------------------------------------------------------

    def _beat(self) -> None:
        now = time.monotonic()
        with self._lock:
            late_s = now - self._last_beat - self._beat_interval_s
            self._last_beat = now
            stack, self._stack = self._stack, None
        if late_s > self._config.stall_threshold_s:
            self._stalled(late_s, stack)
        if not self._stopping.is_set() and self._loop is not None:
            self._handle = self._loop.call_later(self._beat_interval_s, self._beat)

    def _stalled(self, stall_s: float, stack: list[str] | None) -> None:
        self._stalls += 1
        self._longest_s = max(self._longest_s, stall_s)
        self._total_s += stall_s
        end_s = self._clock.now()
        where = stack[-1].strip().splitlines()[0] if stack else "unknown"
        # The loop was in select(), ready to run callbacks: nothing of ours held it; the
        # process got no CPU (an overloaded machine) or another thread held the interpreter.
        idle = bool(stack) and "selectors.py" in where
        if idle:
            where += " (idle: the process got no CPU, or another thread held the interpreter)"
        data = {"stall_s": round(stall_s, 4), "where": where, "idle": idle, "stack": stack or []}
        self._bus.emit(StepEvent(Phase.LOOP_STALL, end_s - stall_s, end_s, data=data))
        if idle:
            return  # recorded: the machine's doing, not a task's, so no warning
        now = time.monotonic()
        if now - self._last_warning < self._config.warning_interval_s:
            self._unwarned += 1
            return
        more = f" ({self._unwarned} more stalls since the last warning)" if self._unwarned else ""
        log.warning(
            "the event loop was stalled for %.2f s (every sample waited) at %s%s; the stack is "
            "in the run's events (phase loop_stall)",
            stall_s,
            where,
            more,
        )
        self._last_warning, self._unwarned = now, 0

    # -- the watching thread ----------------------------------------------------------------

    def _watch(self) -> None:
        # The stack is taken once the heartbeat is half a threshold late and checked every
        # quarter threshold, so even a stall just over the threshold is caught in the act.
        threshold = self._config.stall_threshold_s
        while not self._stopping.wait(threshold / 4):
            with self._lock:
                stale_s = time.monotonic() - self._last_beat - self._beat_interval_s
                taken = self._stack is not None
            if stale_s <= threshold / 2 or taken:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            if frame is None:
                continue
            stack = _frames(frame, self._config.stack_frames)
            with self._lock:
                if self._stack is None:
                    self._stack = stack


def _frames(frame: FrameType | None, limit: int) -> list[str]:
    """The innermost `limit` frames, outermost first, as `File "...", line N, in name`.

    Built by hand: `traceback.format_stack` would read every source file it names into
    `linecache` (about 2 MB over an hour's soak, never released).
    """
    frames: list[str] = []
    while frame is not None and len(frames) < limit:
        code = frame.f_code
        frames.append(f'File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}')
        frame = frame.f_back
    return frames[::-1]
