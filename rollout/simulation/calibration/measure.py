"""Micro-benchmarks of the cost model's terms at a model's shapes (`conductor calibrate gpu`).

Each row times one term for the whole model, every layer on its own buffers (the `Decoder`'s
weights and caches): the dense layers' GEMMs for N tokens (QKV, output, gate/up and down of
every layer, the LM head on one row), decode attention of B requests over L cached tokens
(separate K and V), prefill attention of n new tokens over p cached ones (lower-right causal),
and pinned host<->device copies of KV pages. Every timing is a `Timer` median (CUDA events,
CUDA graphs, the L2 flushed before each repeat). Rows past the time budget, or too big for the
memory budget, are listed under `skipped` with the reason.

Issue 31: the first version passed one tensor as both K and V and reused one layer's buffers
for every repeat, so attention read half the bytes, some from the L2, and c_dec came out at
half its value.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from typing import Any

from rollout.simulation.calibration.config import CalibrationConfig, StepShape
from rollout.simulation.calibration.decoder import Attention, Decoder, sdpa_attention
from rollout.simulation.calibration.timing import Deadline, Timer

__all__ = ["Bench", "measure", "open_bench", "run_header"]

_GIB = 1 << 30
_MIB = 1 << 20


class Bench:
    """A decoder and a timer on one device, and the sweep's deadline and skipped rows."""

    def __init__(self, torch: Any, decoder: Decoder, timer: Timer, deadline: Deadline) -> None:
        self.torch = torch
        self.decoder = decoder
        self.timer = timer
        self.deadline = deadline
        self.skipped: list[dict[str, Any]] = []

    def timed_row(self, row: dict[str, Any], build: Callable[[], Callable[[], object]]) -> bool:
        """Time `build()`'s callable into `row["seconds"]`; False (the row noted as skipped,
        with the reason) past the deadline, when its buffers do not fit, or when torch fails
        on it (out of memory, a kernel that refuses the shape)."""
        if self.deadline.passed():
            self.skipped.append({**row, "reason": "time budget spent"})
            return False
        try:
            row["seconds"] = self.timer.median_s(build())
        except ValueError as exc:  # buffer_sets: the shape does not fit the memory budget
            self.skipped.append({**row, "reason": str(exc)})
            return False
        except RuntimeError as exc:  # out of device memory, or a kernel refusing the shape:
            # one row's failure must not cost the GPU session the rest of the sweep
            self.skipped.append({**row, "reason": f"{type(exc).__name__}: {exc}"})
            if self.timer.cuda:
                self.torch.cuda.empty_cache()
            return False
        return True


def open_bench(
    config: CalibrationConfig, *, device: str, attention: Attention = sdpa_attention
) -> Bench:
    """The model's weights on `device` and a timer; RuntimeError without a CUDA device."""
    import torch  # deferred: importing torch takes seconds

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(
            "no CUDA device: run on the GPU machine, or use --device cpu with "
            "configs/calibrate/tiny_cpu.yaml"
        )
    if not device.startswith("cuda") and config.timing.cpu_threads is not None:
        torch.set_num_threads(config.timing.cpu_threads)  # process-wide: the CLI's own process
    deadline = Deadline(config.timing.time_budget_s)
    flush_bytes = int(config.device.l2_flush_mib * _MIB)
    decoder = Decoder(
        torch,
        config.shapes,
        device=device,
        budget_bytes=int(config.device.memory_budget_gib * _GIB),
        flush_bytes=flush_bytes,
        attention=attention,
    )
    timer = Timer(torch, device, config.timing, config.device)
    return Bench(torch, decoder, timer, deadline)


def run_header(bench: Bench, config: CalibrationConfig) -> dict[str, Any]:
    """Where and when the timings were taken, and the config they were taken with."""
    torch = bench.torch
    cuda = bench.timer.cuda
    return {
        "device": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
        "torch": torch.__version__,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "timing": "cuda events" + (", cuda graphs" if config.timing.cuda_graphs else "")
        if cuda
        else "perf_counter",
        "config": config.model_dump(mode="json"),
    }


def measure(bench: Bench, config: CalibrationConfig) -> dict[str, Any]:
    """Run the micro sweep; the JSON-ready rows (`fit.fit_micro` turns them into values)."""
    micro = config.micro
    return {
        "gemm": _gemm_rows(bench, micro.gemm_tokens),
        "decode": [
            row
            for batch in micro.decode_batches
            for context in micro.decode_contexts
            for row in _attention_row(bench, StepShape(decode_batch=batch, decode_context=context))
        ],
        "prefill": [
            row
            for new in micro.prefill_chunks
            for prefix in micro.prefill_prefixes
            for row in _attention_row(bench, StepShape(prefill_chunk=new, prefill_prefix=prefix))
        ],
        "link": _link_rows(bench, config),
    }


def _gemm_rows(bench: Bench, token_counts: tuple[int, ...]) -> list[dict[str, Any]]:
    """Every layer's four GEMMs for N tokens plus the LM head on one row (the weights' read)."""
    decoder, s = bench.decoder, bench.decoder.shapes
    rows = []
    for tokens in token_counts:
        row: dict[str, Any] = {"tokens": tokens}

        def build(tokens: int = tokens) -> Callable[[], object]:
            x = decoder.random(tokens, s.hidden)
            attended = decoder.random(tokens, s.q_heads * s.head_dim)
            mlp = decoder.random(tokens, s.intermediate)

            def gemms() -> None:
                for index in range(s.layers):
                    weights = decoder.weights[index % len(decoder.weights)]
                    x @ weights.qkv
                    attended @ weights.o
                    x @ weights.gate_up
                    mlp @ weights.down
                x[-1:] @ decoder.lm_head

            return gemms

        if bench.timed_row(row, build):
            rows.append(row)
    return rows


def _attention_row(bench: Bench, step: StepShape) -> list[dict[str, Any]]:
    """Every layer's attention for `step` (decode or prefill part), each over its own K and V."""
    decoder, s = bench.decoder, bench.decoder.shapes
    decode = step.kind == "decode"
    row: dict[str, Any] = (
        {"batch": step.decode_batch, "context": step.decode_context}
        if decode
        else {"new": step.prefill_chunk, "prefix": step.prefill_prefix}
    )

    def build() -> Callable[[], object]:
        caches = decoder.caches(step)
        batch, new = (step.decode_batch, 1) if decode else (1, step.prefill_chunk)
        q = decoder.random(batch, s.q_heads, new, s.head_dim)

        def attend() -> None:
            for index in range(s.layers):
                cache = caches[index % len(caches)]
                if decode:
                    decoder.attention(q, cache.decode_k, cache.decode_v, causal=False)
                else:
                    decoder.attention(q, cache.prefill_k, cache.prefill_v, causal=True)

        return attend

    return [row] if bench.timed_row(row, build) else []


def _link_rows(bench: Bench, config: CalibrationConfig) -> list[dict[str, Any]]:
    """Pinned host<->device copies of whole KV pages, each direction (eager, not captured)."""
    torch, timer = bench.torch, bench.timer
    device = bench.decoder.device
    page_bytes = config.micro.page_tokens * config.shapes.kv_bytes_per_token
    rows: list[dict[str, Any]] = []
    for pages in config.micro.link_pages:
        size = pages * page_bytes
        if bench.deadline.passed():
            bench.skipped.append({"pages": pages, "reason": "time budget spent"})
            continue
        host = torch.empty(size, dtype=torch.uint8, pin_memory=timer.cuda)
        target = torch.empty(size, dtype=torch.uint8, device=device)

        def to_device(host: Any = host, target: Any = target) -> None:
            target.copy_(host, non_blocking=timer.cuda)

        def to_host(host: Any = host, target: Any = target) -> None:
            host.copy_(target, non_blocking=timer.cuda)

        for direction, copy in (("h2d", to_device), ("d2h", to_host)):
            seconds = timer.median_s(copy, capture=False)
            rows.append({"direction": direction, "bytes": size, "seconds": seconds})
    return rows
