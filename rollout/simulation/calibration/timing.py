"""`Timer`: the median time of a run on a torch device, with the L2 flushed before each repeat.

On CUDA each repeat is bracketed by CUDA events on the run's stream (the GPU's own clock, no
host synchronisation inside the bracket), and the run is captured once in a CUDA graph and
replayed when `timing.cuda_graphs` is set, so kernel launches do not pad small steps. Before
every repeat (warm-up included) a buffer of `device.l2_flush_mib` is written, so nothing the
previous repeat read is still in the L2 (issue 31: a buffer read again and again from the L2
times faster than the HBM can deliver). On CPU the bracket is `time.perf_counter`.

Importing this module does not import torch; `Timer` takes the module it should use.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from rollout.simulation.calibration.config import DeviceLimits, TimingConfig

__all__ = ["Deadline", "Timer"]

_MIB = 1 << 20


class Deadline:
    """The wall-clock end of a sweep: `passed()` once `budget_s` seconds have gone by."""

    def __init__(self, budget_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end = clock() + budget_s

    def passed(self) -> bool:
        """Whether the budget is spent (a sweep skips its remaining rows)."""
        return self._clock() >= self._end


class Timer:
    """Times callables on one device; see the module docstring for how."""

    def __init__(self, torch: Any, device: str, timing: TimingConfig, limits: DeviceLimits) -> None:
        self._torch = torch
        self._cuda = device.startswith("cuda")
        self._timing = timing
        flush_bytes = int(limits.l2_flush_mib * _MIB)
        if self._cuda:
            l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
            if flush_bytes < l2_bytes:
                raise ValueError(
                    f"device.l2_flush_mib {limits.l2_flush_mib} is below this GPU's L2 "
                    f"({l2_bytes / _MIB:.0f} MiB): raise it in the calibration config"
                )
        self._flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device)

    @property
    def cuda(self) -> bool:
        """Whether runs are timed on a CUDA device (events, graphs)."""
        return self._cuda

    def flush_l2(self) -> None:
        """Overwrite the flush buffer: evicts whatever the last run left in the cache."""
        self._flush.fill_(1)

    def median_s(self, run: Callable[[], object], *, capture: bool = True) -> float:
        """The median seconds of `run` over `timing.repeats` after `timing.warmup`.

        `capture`: replay it from a CUDA graph when `timing.cuda_graphs` is set (False for
        host<->device copies, which are timed as issued).
        """
        if capture and self._cuda and self._timing.cuda_graphs:
            run = self._captured(run)
        for _ in range(self._timing.warmup):
            self.flush_l2()
            run()
        samples = [self._one(run) for _ in range(self._timing.repeats)]
        return statistics.median(samples)

    def _one(self, run: Callable[[], object]) -> float:
        self.flush_l2()
        if not self._cuda:
            start = time.perf_counter()
            run()
            return time.perf_counter() - start
        cuda = self._torch.cuda
        start_event = cuda.Event(enable_timing=True)
        end_event = cuda.Event(enable_timing=True)
        start_event.record()
        run()
        end_event.record()
        end_event.synchronize()
        return start_event.elapsed_time(end_event) / 1e3  # elapsed_time is in ms

    def _captured(self, run: Callable[[], object]) -> Callable[[], object]:
        """`run` captured in a CUDA graph (warmed up on a side stream first, as capture needs)."""
        cuda = self._torch.cuda
        side = cuda.Stream()
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            run()
        cuda.current_stream().wait_stream(side)
        graph = cuda.CUDAGraph()
        with cuda.graph(graph):
            run()
        return graph.replay
