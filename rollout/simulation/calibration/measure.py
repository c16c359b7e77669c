"""Torch-only micro-benchmarks of the cost model's terms at a model's shapes.

Times, for the whole model (one layer measured, times `layers`): the dense layers' GEMMs for N
tokens (QKV, output, gate/up, down projections; the LM head once), decode attention of B
requests over L cached tokens (`scaled_dot_product_attention`, grouped-query), prefill
attention of n new tokens over p cached ones (causal), and pinned host<->device copies of KV
pages. Every measurement is the median of `repeats` after `warmup`, synchronised on CUDA; the
sweep stops early (keeping what it has) when `time_budget_s` runs out. On CPU it runs too
(`--quick`), for tests and a dry run.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from foundation.config import FrozenConfig

__all__ = ["CalibrationConfig", "measure"]


class CalibrationConfig(FrozenConfig):
    """Model shapes and the sweep (`configs/calibrate/*.yaml`)."""

    layers: int = Field(ge=1, description="Transformer layers.")
    hidden: int = Field(ge=1, description="Hidden size.")
    intermediate: int = Field(ge=1, description="MLP intermediate size.")
    q_heads: int = Field(ge=1, description="Query heads.")
    kv_heads: int = Field(ge=1, description="Key/value heads (grouped-query attention).")
    head_dim: int = Field(ge=1, description="Head dimension.")
    vocab: int = Field(ge=1, description="Vocabulary size (LM head).")
    dtype: Literal["bfloat16", "float16", "float32"] = Field(default="bfloat16")
    kv_bytes_per_token: int = Field(ge=1, description="KV bytes per token, all layers.")
    page_tokens: int = Field(default=64, ge=1, description="Tokens per KV page.")
    gemm_tokens: tuple[int, ...] = Field(min_length=2, description="Token counts N.")
    decode_batches: tuple[int, ...] = Field(min_length=1, description="Decode batch sizes B.")
    decode_contexts: tuple[int, ...] = Field(min_length=1, description="Context lengths L.")
    prefill_chunks: tuple[int, ...] = Field(min_length=1, description="New tokens n.")
    prefill_prefixes: tuple[int, ...] = Field(min_length=1, description="Cached tokens p.")
    link_pages: tuple[int, ...] = Field(min_length=2, description="Pages per copy.")
    warmup: int = Field(default=3, ge=0, description="Untimed runs before timing.")
    repeats: int = Field(default=10, ge=1, description="Timed runs; the median is kept.")
    time_budget_s: float = Field(default=240.0, gt=0, description="Stop the sweep after (s).")


def quick(config: CalibrationConfig) -> CalibrationConfig:
    """A tiny sweep at tiny shapes: seconds on a CPU (tests, dry runs)."""
    return config.model_copy(
        update={
            "layers": 2, "hidden": 64, "intermediate": 128, "q_heads": 4, "kv_heads": 2,
            "head_dim": 16, "vocab": 256, "dtype": "float32",
            "kv_bytes_per_token": 2 * 2 * 2 * 16 * 4, "page_tokens": 16,
            "gemm_tokens": (1, 8, 32, 64), "decode_batches": (1, 4), "decode_contexts": (64, 256),
            "prefill_chunks": (16, 64), "prefill_prefixes": (0, 64), "link_pages": (1, 8, 32),
            "warmup": 1, "repeats": 3, "time_budget_s": 60.0,
        }
    )  # fmt: skip


def measure(config: CalibrationConfig, *, device: str = "cuda") -> dict[str, Any]:
    """Run the sweep on `device`; the JSON-ready raw timings (`fit` turns them into values)."""
    import torch  # deferred: importing torch takes seconds
    import torch.nn.functional as functional

    dtype = getattr(torch, config.dtype)
    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: run on the GPU machine, or pass --device cpu --quick")
    deadline = time.monotonic() + config.time_budget_s

    def timed(run: Callable[[], object]) -> float:
        for _ in range(config.warmup):
            run()
        samples = []
        for _ in range(config.repeats):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            run()
            if cuda:
                torch.cuda.synchronize()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    c = config
    q_out = c.q_heads * c.head_dim
    kv_out = c.kv_heads * c.head_dim
    weights = {
        "qkv": torch.randn(c.hidden, q_out + 2 * kv_out, device=device, dtype=dtype),
        "o": torch.randn(q_out, c.hidden, device=device, dtype=dtype),
        "gate_up": torch.randn(c.hidden, 2 * c.intermediate, device=device, dtype=dtype),
        "down": torch.randn(c.intermediate, c.hidden, device=device, dtype=dtype),
        "lm_head": torch.randn(c.hidden, c.vocab, device=device, dtype=dtype),
    }
    gemm = []
    for tokens in c.gemm_tokens:
        if time.monotonic() > deadline:
            break
        x = torch.randn(tokens, c.hidden, device=device, dtype=dtype)
        attn = torch.randn(tokens, q_out, device=device, dtype=dtype)
        mlp = torch.randn(tokens, c.intermediate, device=device, dtype=dtype)

        def layer(x: Any = x, attn: Any = attn, mlp: Any = mlp) -> None:
            x @ weights["qkv"]
            attn @ weights["o"]
            x @ weights["gate_up"]
            mlp @ weights["down"]

        def head(x: Any = x) -> None:
            x[-1:] @ weights["lm_head"]

        per_layer, head_s = timed(layer), timed(head)
        gemm.append({"tokens": tokens, "seconds": per_layer * c.layers + head_s})

    decode = []
    for batch in c.decode_batches:
        for context in c.decode_contexts:
            if time.monotonic() > deadline:
                break
            q = torch.randn(batch, c.q_heads, 1, c.head_dim, device=device, dtype=dtype)
            kv = torch.randn(batch, c.kv_heads, context, c.head_dim, device=device, dtype=dtype)

            def attend(q: Any = q, kv: Any = kv) -> None:
                functional.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)

            seconds = timed(attend)
            decode.append({"batch": batch, "context": context, "seconds": seconds * c.layers})

    prefill = []
    for new in c.prefill_chunks:
        for prefix in c.prefill_prefixes:
            if time.monotonic() > deadline:
                break
            q = torch.randn(1, c.q_heads, new, c.head_dim, device=device, dtype=dtype)
            kv = torch.randn(1, c.kv_heads, prefix + new, c.head_dim, device=device, dtype=dtype)
            # Causal over the prefix: query i sees cached tokens and new tokens up to i.
            mask = torch.ones(new, prefix + new, device=device, dtype=torch.bool).tril(prefix)

            def attend_causal(q: Any = q, kv: Any = kv, mask: Any = mask) -> None:
                functional.scaled_dot_product_attention(q, kv, kv, attn_mask=mask, enable_gqa=True)

            seconds = timed(attend_causal)
            prefill.append({"new": new, "prefix": prefix, "seconds": seconds * c.layers})

    link = []
    page_bytes = c.page_tokens * c.kv_bytes_per_token
    for pages in c.link_pages:
        if time.monotonic() > deadline:
            break
        size = pages * page_bytes
        host = torch.empty(size, dtype=torch.uint8, pin_memory=cuda)
        target = torch.empty(size, dtype=torch.uint8, device=device)

        def to_device(host: Any = host, target: Any = target) -> None:
            target.copy_(host, non_blocking=cuda)

        def to_host(host: Any = host, target: Any = target) -> None:
            host.copy_(target, non_blocking=cuda)

        h2d, d2h = timed(to_device), timed(to_host)
        link += [
            {"direction": "h2d", "bytes": size, "seconds": h2d},
            {"direction": "d2h", "bytes": size, "seconds": d2h},
        ]
    return {
        "device": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
        "torch": torch.__version__,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": config.model_dump(mode="json"),
        "gemm": gemm,
        "decode": decode,
        "prefill": prefill,
        "link": link,
    }
