"""A Qwen3-like decoder at a model's shapes, built to be timed: one whole forward per call.

Each layer does what an engine's layer does on the GPU: RMSNorm, the QKV projection, per-head
q/k RMSNorm, rotary embedding, the write of the new tokens' K and V into the cache, attention
(decode requests over their cached K and V, a prefill chunk causally over its prefix and
itself), the output projection, RMSNorm and the SwiGLU MLP; then the final norm, the LM head on
each sequence's last token and a greedy pick. The weights are random (timing does not depend
on their values).

Nothing is read from the L2 that a real model would read from HBM (issue 31):
* K and V are separate tensors, allocated one by one: attention reads both;
* every layer has its own weights and its own K/V cache when the memory budget holds them
  (a real model's layers do); when it does not (a 128 × 16k-token batch is 300 GB of KV), the
  layers cycle through as many buffer sets as fit, and `buffer_sets` refuses a cycle small
  enough to stay in the L2 between two uses.

The attention kernel is a seam (`Attention`): `sdpa_attention` (torch's fused kernels) by
default; tests pass a wrapper that checks what it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rollout.simulation.calibration.config import ModelShapes, StepShape

__all__ = [
    "Attention",
    "Decoder",
    "LayerCache",
    "LayerWeights",
    "buffer_sets",
    "sdpa_attention",
]

_GIB = 1 << 30
_MIB = 1 << 20
# Qwen3's RMSNorm epsilon and rotary base (its HF config: rms_norm_eps, rope_theta).
_NORM_EPS = 1e-6
_ROPE_BASE = 1_000_000.0
# Small random weights keep activations finite through dozens of layers.
_WEIGHT_STD = 0.02


class Attention(Protocol):
    """Attention of queries `q` (batch, H_q, new, d) over `k`, `v` (batch, H_kv, context, d).

    `causal`: each query i of the `new` ones sees the context up to its own position (the
    last `new` keys are the queries' own tokens: lower-right causal); False for decode.
    """

    def __call__(self, q: Any, k: Any, v: Any, *, causal: bool) -> Any: ...


def sdpa_attention(q: Any, k: Any, v: Any, *, causal: bool) -> Any:
    """torch's `scaled_dot_product_attention` with grouped-query heads (fused kernels on CUDA)."""
    import torch.nn.functional as functional  # deferred: importing torch takes seconds
    from torch.nn.attention.bias import causal_lower_right

    mask = causal_lower_right(q.shape[-2], k.shape[-2]) if causal else None
    return functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def buffer_sets(*, layers: int, per_layer_bytes: int, budget_bytes: int, flush_bytes: int) -> int:
    """How many distinct per-layer buffer sets to allocate: all `layers` if the budget holds
    them, else as many as fit (layer i uses set i mod n).

    Raises ValueError when not even one fits, or when a cycle shorter than `layers` adds up to
    less than `flush_bytes` (its buffers could still be in the L2 when a later layer reads them
    again): both mean the budget is too small for this shape.
    """
    if per_layer_bytes <= 0:
        return layers
    fitting = min(layers, budget_bytes // per_layer_bytes)
    if fitting < 1:
        raise ValueError(
            f"one layer's buffers ({per_layer_bytes / _GIB:.2f} GiB) exceed the memory budget "
            f"({budget_bytes / _GIB:.2f} GiB): raise device.memory_budget_gib or drop the shape"
        )
    if fitting < layers and fitting * per_layer_bytes < flush_bytes:
        raise ValueError(
            f"{fitting} buffer sets of {per_layer_bytes / _MIB:.1f} MiB would stay in the L2 "
            f"(< {flush_bytes / _MIB:.0f} MiB) between layers: raise device.memory_budget_gib"
        )
    return fitting


@dataclass(frozen=True, slots=True)
class LayerWeights:
    """One layer's weights (each its own allocation)."""

    qkv: Any
    o: Any
    gate_up: Any
    down: Any
    input_norm: Any
    post_norm: Any
    q_norm: Any
    k_norm: Any

    def nbytes(self) -> int:
        return sum(
            tensor.numel() * tensor.element_size()
            for tensor in (self.qkv, self.o, self.gate_up, self.down)
        )


@dataclass(frozen=True, slots=True)
class LayerCache:
    """One layer's KV for one step: decode K and V (B, H_kv, L, d) and the chunk's (1, H_kv,
    p + n, d); None where the step has no such part. K and V are separate allocations."""

    decode_k: Any
    decode_v: Any
    prefill_k: Any
    prefill_v: Any


class Decoder:
    """The model's weights on `device`, and whole forwards of `StepShape`s over fresh caches.

    Args:
        torch: the torch module (passed in: importing it takes seconds).
        shapes: the model's shapes.
        device: torch device string.
        budget_bytes: device memory the weights, caches and activations may take.
        flush_bytes: the L2 flush size (see `buffer_sets`).
        attention: the attention kernel (`sdpa_attention` unless a test wraps it).
    """

    def __init__(
        self,
        torch: Any,
        shapes: ModelShapes,
        *,
        device: str,
        budget_bytes: int,
        flush_bytes: int,
        attention: Attention = sdpa_attention,
    ) -> None:
        self.torch = torch
        self.shapes = shapes
        self.device = device
        self.dtype = getattr(torch, shapes.dtype)
        self.attention = attention
        self._flush_bytes = flush_bytes
        layer_bytes = shapes.layer_weight_params * shapes.dtype_bytes
        head_bytes = shapes.hidden * shapes.vocab * shapes.dtype_bytes
        sets = buffer_sets(
            layers=shapes.layers,
            per_layer_bytes=layer_bytes,
            budget_bytes=budget_bytes - head_bytes,
            flush_bytes=flush_bytes,
        )
        self.weights = tuple(self._layer_weights() for _ in range(sets))
        self.final_norm = self._ones(shapes.hidden)
        self.lm_head = self.random(shapes.hidden, shapes.vocab)
        self._kv_budget = budget_bytes - head_bytes - sets * layer_bytes

    # -- allocation -------------------------------------------------------------------------

    def random(self, *size: int) -> Any:
        """A new tensor of `size` on the device, filled with small random values."""
        return self.torch.empty(*size, device=self.device, dtype=self.dtype).normal_(
            0.0, _WEIGHT_STD
        )

    def _ones(self, *size: int) -> Any:
        return self.torch.ones(*size, device=self.device, dtype=self.dtype)

    def _layer_weights(self) -> LayerWeights:
        s = self.shapes
        q_out, kv_out = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
        return LayerWeights(
            qkv=self.random(s.hidden, q_out + 2 * kv_out),
            o=self.random(q_out, s.hidden),
            gate_up=self.random(s.hidden, 2 * s.intermediate),
            down=self.random(s.intermediate, s.hidden),
            input_norm=self._ones(s.hidden),
            post_norm=self._ones(s.hidden),
            q_norm=self._ones(s.head_dim),
            k_norm=self._ones(s.head_dim),
        )

    def cache_bytes(self, step: StepShape) -> int:
        """One layer's KV bytes for `step` (decode and chunk caches, K and V)."""
        s = self.shapes
        tokens = step.decode_batch * step.decode_context
        if step.prefill_chunk:
            tokens += step.prefill_prefix + step.prefill_chunk
        return 2 * tokens * s.kv_heads * s.head_dim * s.dtype_bytes

    def caches(self, step: StepShape) -> tuple[LayerCache, ...]:
        """Fresh per-layer caches for `step` (cycled as `buffer_sets` says); ValueError when
        the budget left after the weights cannot hold one layer's."""
        s = self.shapes
        sets = buffer_sets(
            layers=s.layers,
            per_layer_bytes=self.cache_bytes(step),
            budget_bytes=self._kv_budget,
            flush_bytes=self._flush_bytes,
        )
        caches = []
        for _ in range(sets):
            decode = prefill = (None, None)
            if step.decode_batch:
                size = (step.decode_batch, s.kv_heads, step.decode_context, s.head_dim)
                decode = (self.random(*size), self.random(*size))
            if step.prefill_chunk:
                size = (1, s.kv_heads, step.prefill_prefix + step.prefill_chunk, s.head_dim)
                prefill = (self.random(*size), self.random(*size))
            caches.append(LayerCache(*decode, *prefill))
        return tuple(caches)

    # -- the forward ------------------------------------------------------------------------

    def step(self, step: StepShape) -> Callable[[], Any]:
        """A callable that runs one whole forward of `step` (the tensors it needs allocated
        now, so the callable itself only computes: it can be captured in a CUDA graph)."""
        torch, s = self.torch, self.shapes
        caches = self.caches(step)
        tokens = step.tokens
        x_in = self.random(tokens, s.hidden)
        positions = torch.cat(
            [
                torch.full((step.decode_batch,), step.decode_context - 1, device=self.device),
                torch.arange(
                    step.prefill_prefix, step.prefill_prefix + step.prefill_chunk,
                    device=self.device,
                ),
            ]
        )  # fmt: skip
        cos, sin = self._rotary(positions)
        # Each sequence's last token goes to the LM head: every decode row, the chunk's last.
        last_rows = list(range(step.decode_batch))
        if step.prefill_chunk:
            last_rows.append(tokens - 1)
        last = torch.tensor(last_rows, device=self.device)

        def forward() -> Any:
            x = x_in
            for index in range(s.layers):
                weights = self.weights[index % len(self.weights)]
                cache = caches[index % len(caches)]
                x = self._layer(x, weights, cache, step, cos, sin)
            x = torch.nn.functional.rms_norm(x, (s.hidden,), self.final_norm, _NORM_EPS)
            return (x.index_select(0, last) @ self.lm_head).argmax(dim=-1)

        return forward

    def _rotary(self, positions: Any) -> tuple[Any, Any]:
        """cos and sin tables (tokens, 1, head_dim) of the rotary embedding at `positions`."""
        torch, d = self.torch, self.shapes.head_dim
        inverse = _ROPE_BASE ** (
            -torch.arange(0, d, 2, device=self.device, dtype=torch.float32) / d
        )
        angles = positions.to(torch.float32)[:, None] * inverse[None, :]
        angles = torch.cat([angles, angles], dim=-1)[:, None, :]
        return angles.cos().to(self.dtype), angles.sin().to(self.dtype)

    def _layer(
        self, x: Any, w: LayerWeights, cache: LayerCache, step: StepShape, cos: Any, sin: Any
    ) -> Any:
        torch, s = self.torch, self.shapes
        rms_norm = torch.nn.functional.rms_norm
        tokens = x.shape[0]
        q_out, kv_out = s.q_heads * s.head_dim, s.kv_heads * s.head_dim
        h = rms_norm(x, (s.hidden,), w.input_norm, _NORM_EPS)
        q, k, v = (h @ w.qkv).split([q_out, kv_out, kv_out], dim=-1)
        q = rms_norm(q.view(tokens, s.q_heads, s.head_dim), (s.head_dim,), w.q_norm, _NORM_EPS)
        k = rms_norm(k.view(tokens, s.kv_heads, s.head_dim), (s.head_dim,), w.k_norm, _NORM_EPS)
        v = v.view(tokens, s.kv_heads, s.head_dim)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        outputs = []
        b = step.decode_batch
        if b:
            # The new token's K and V go to the last slot of each request's cache.
            cache.decode_k[:, :, -1] = k[:b]
            cache.decode_v[:, :, -1] = v[:b]
            attended = self.attention(
                q[:b].unsqueeze(2), cache.decode_k, cache.decode_v, causal=False
            )
            outputs.append(attended.reshape(b, q_out))
        if step.prefill_chunk:
            start = step.prefill_prefix
            cache.prefill_k[0, :, start:] = k[b:].transpose(0, 1)
            cache.prefill_v[0, :, start:] = v[b:].transpose(0, 1)
            attended = self.attention(
                q[b:].transpose(0, 1).unsqueeze(0), cache.prefill_k, cache.prefill_v, causal=True
            )
            outputs.append(attended[0].transpose(0, 1).reshape(step.prefill_chunk, q_out))
        attended = outputs[0] if len(outputs) == 1 else torch.cat(outputs)
        x = x + attended @ w.o
        h = rms_norm(x, (s.hidden,), w.post_norm, _NORM_EPS)
        gate, up = (h @ w.gate_up).chunk(2, dim=-1)
        return x + (torch.nn.functional.silu(gate) * up) @ w.down


def _rotate(x: Any, cos: Any, sin: Any) -> Any:
    """Rotary embedding: x·cos + rotate_half(x)·sin (tables broadcast over heads)."""
    half = x.shape[-1] // 2
    rotated = x.new_empty(x.shape)
    rotated[..., :half] = -x[..., half:]
    rotated[..., half:] = x[..., :half]
    return x * cos + rotated * sin
