"""The calibration's configuration (`configs/calibrate/*.yaml`): shapes, device limits, sweeps.

One file says which model is timed (its shapes and the model config whose coefficients the
validate table compares), what the device can do at most (the limits every fitted coefficient
is checked against), how each timing is taken, and the grids of the micro-benchmarks and of
the whole steps. Every shape, grid and repeat count lives here, none in the code.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from foundation.config import FrozenConfig

__all__ = [
    "CalibrationConfig",
    "DeviceLimits",
    "MicroSweepConfig",
    "ModelShapes",
    "StepShape",
    "StepSweepConfig",
    "TimingConfig",
]

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


class ModelShapes(FrozenConfig):
    """The decoder's shapes (a Qwen3-like dense model: GQA attention, SwiGLU MLP, untied head)."""

    layers: int = Field(ge=1, description="Transformer layers.")
    hidden: int = Field(ge=1, description="Hidden size.")
    intermediate: int = Field(ge=1, description="MLP intermediate size.")
    q_heads: int = Field(ge=1, description="Query heads.")
    kv_heads: int = Field(ge=1, description="Key/value heads (grouped-query attention).")
    head_dim: int = Field(ge=1, description="Head dimension.")
    vocab: int = Field(ge=1, description="Vocabulary size (LM head columns).")
    dtype: Literal["bfloat16", "float16", "float32"] = Field(
        default="bfloat16", description="Weights, activations and KV element type."
    )

    @model_validator(mode="after")
    def _heads_group(self) -> ModelShapes:
        if self.q_heads % self.kv_heads:
            raise ValueError(
                f"q_heads ({self.q_heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        return self

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element of `dtype`."""
        return _DTYPE_BYTES[self.dtype]

    @property
    def kv_bytes_per_token(self) -> int:
        """KV bytes one token holds over all layers: 2 (K, V) × layers × KV heads × head_dim × B."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def layer_weight_params(self) -> int:
        """GEMM weight parameters of one layer: QKV, output, gate/up and down projections."""
        q_out, kv_out = self.q_heads * self.head_dim, self.kv_heads * self.head_dim
        return (
            self.hidden * (q_out + 2 * kv_out)
            + q_out * self.hidden
            + 3 * (self.hidden * self.intermediate)
        )

    @property
    def weight_params(self) -> int:
        """Weight parameters read per decode step: every layer's GEMMs plus the LM head."""
        return self.layers * self.layer_weight_params + self.hidden * self.vocab

    @property
    def prefill_flops_per_unit(self) -> int:
        """Attention FLOPs per (new token × context token) of prefill: 4 · layers · H_q · d."""
        return 4 * self.layers * self.q_heads * self.head_dim


class DeviceLimits(FrozenConfig):
    """What the device can do at most, and how much of it the benchmark may take.

    A fitted coefficient that implies more than `memory_bandwidth_gb_per_s` or `peak_tflops`
    is a broken measurement (issue 31: K and V were one tensor, and c_dec implied 8.4 TB/s on a
    4.8 TB/s H200), and `calibrate` refuses to apply it.
    """

    name: str = Field(min_length=1, description="Device label, e.g. 'H200 SXM'.")
    memory_bandwidth_gb_per_s: float = Field(
        gt=0, description="Peak memory bandwidth in GB/s (10^9 B/s): the datasheet figure."
    )
    peak_tflops: float = Field(
        gt=0, description="Peak dense matmul throughput at `shapes.dtype`, in TFLOP/s."
    )
    memory_budget_gib: float = Field(
        gt=0,
        description="Device memory the weights and KV caches may take, in GiB; activations, "
        "CUDA graphs and the L2 flush buffer need a few GiB more outside it.",
    )
    l2_flush_mib: float = Field(
        gt=0,
        description="MiB written between timed repeats so that no data of the previous "
        "repeat stays in the L2; at least the device's L2 (torch reports 60 MB on an H200). "
        "Buffers that a step reuses across layers must also add up to at least this much.",
    )


class TimingConfig(FrozenConfig):
    """How one timing is taken: `warmup` untimed runs, then the median of `repeats`."""

    warmup: int = Field(default=3, ge=0, description="Untimed runs before timing.")
    repeats: int = Field(default=10, ge=1, description="Timed runs; the median is kept.")
    cuda_graphs: bool = Field(
        default=True,
        description="On CUDA, capture each timed run in a CUDA graph and replay it (what an "
        "engine does for decode); ignored on CPU.",
    )
    cpu_threads: int | None = Field(
        default=None,
        ge=1,
        description="torch's intra-op threads on CPU (None: its default). 1 keeps a CPU run "
        "steady on a shared machine: waiting for a busy core stalls a thread pool for a "
        "whole time slice (100 ms for a 64-token GEMM was seen).",
    )
    time_budget_s: float = Field(
        gt=0,
        description="Wall seconds for the whole command (micro sweep, whole steps); rows past "
        "it are skipped and listed as skipped.",
    )


class MicroSweepConfig(FrozenConfig):
    """The micro-benchmarks' grids (`conductor calibrate gpu`): one cost-model term each."""

    gemm_tokens: tuple[int, ...] = Field(
        min_length=2, description="Token counts N through every layer's GEMMs."
    )
    decode_batches: tuple[int, ...] = Field(min_length=1, description="Decode batch sizes B.")
    decode_contexts: tuple[int, ...] = Field(min_length=1, description="Context lengths L.")
    prefill_chunks: tuple[int, ...] = Field(min_length=1, description="New tokens n.")
    prefill_prefixes: tuple[int, ...] = Field(min_length=1, description="Cached tokens p.")
    page_tokens: int = Field(default=64, ge=1, description="Tokens per KV page (copies).")
    link_pages: tuple[int, ...] = Field(
        min_length=2, description="Pages per host<->device copy (two distinct sizes at least)."
    )


class StepShape(FrozenConfig):
    """One whole forward: `decode_batch` requests over `decode_context` tokens each, plus one
    prefill chunk of `prefill_chunk` new tokens after `prefill_prefix` cached ones."""

    decode_batch: int = Field(default=0, ge=0, description="Decoding requests B.")
    decode_context: int = Field(
        default=0, ge=0, description="Tokens each decoding request attends to (L, incl. its new)."
    )
    prefill_chunk: int = Field(default=0, ge=0, description="New prompt tokens n (0: none).")
    prefill_prefix: int = Field(default=0, ge=0, description="Tokens cached before the chunk p.")

    @model_validator(mode="after")
    def _not_empty(self) -> StepShape:
        if self.decode_batch == 0 and self.prefill_chunk == 0:
            raise ValueError("a step needs decode_batch > 0 or prefill_chunk > 0")
        if self.decode_batch > 0 and self.decode_context < 1:
            raise ValueError("decoding requests need decode_context >= 1")
        return self

    @property
    def kind(self) -> str:
        """'decode', 'prefill' or 'mixed'."""
        if self.prefill_chunk == 0:
            return "decode"
        return "prefill" if self.decode_batch == 0 else "mixed"

    @property
    def tokens(self) -> int:
        """Tokens through the dense layers: one per decoding request plus the chunk's."""
        return self.decode_batch + self.prefill_chunk


class StepSweepConfig(FrozenConfig):
    """The whole steps `conductor calibrate validate` times, and what it fits from them."""

    decode_batches: tuple[int, ...] = Field(
        min_length=2, description="Decode batch sizes B (two at least: b_tok apart from t_fix)."
    )
    decode_contexts: tuple[int, ...] = Field(
        min_length=2, description="Context lengths L (two at least: c_dec apart from b_tok)."
    )
    prefill_chunks: tuple[int, ...] = Field(
        min_length=1, description="Prefill chunk sizes n (the engine's chunked prefill)."
    )
    prefill_prefixes: tuple[int, ...] = Field(
        min_length=1, description="Tokens cached before a chunk p."
    )
    mixed: tuple[StepShape, ...] = Field(
        default=(),
        description="Mixed prefill+decode steps; held out of the fit, so they test the model.",
    )
    max_decode_error: float = Field(
        default=0.10,
        gt=0,
        description="Relative error a decode row of the calibrated model may have (issue 31: "
        "every decode row within 10 %); rows beyond it are flagged in the table.",
    )

    def shapes(self) -> tuple[StepShape, ...]:
        """Every step in timing order: the decode grid, the prefill grid, the mixed steps."""
        decode = tuple(
            StepShape(decode_batch=batch, decode_context=context)
            for batch in self.decode_batches
            for context in self.decode_contexts
        )
        prefill = tuple(
            StepShape(prefill_chunk=chunk, prefill_prefix=prefix)
            for chunk in self.prefill_chunks
            for prefix in self.prefill_prefixes
        )
        return decode + prefill + self.mixed


class CalibrationConfig(FrozenConfig):
    """A calibration: the model timed, the device's limits, the timing and both sweeps."""

    model_path: str = Field(
        min_length=1,
        description="The model config (configs/model/*.yaml) whose configured coefficients "
        "the validate table compares; relative to this file.",
    )
    shapes: ModelShapes
    device: DeviceLimits
    timing: TimingConfig
    micro: MicroSweepConfig
    steps: StepSweepConfig
