"""The simulated model on its GPU: sizes, the KV pool it leaves, and its step-time coefficients.

Loaded from `configs/model/*.yaml`. The device KV pool follows SGLang's sizing
(perf-model.md §2): `mem_fraction_static × GPU memory − weights − slack`, divided by the KV bytes
per token, rounded down to whole pages.
"""

from __future__ import annotations

from pydantic import Field

from foundation.config import FrozenConfig
from rollout.engines.sim.cost_model import CostModelConfig

__all__ = ["GpuConfig", "ServedModelConfig"]

_GIB = 1024**3


class GpuConfig(FrozenConfig):
    """The accelerator the model is served on (one device; TP1)."""

    name: str = Field(description="Label for reports, e.g. 'H200 SXM'.")
    memory_gib: float = Field(
        gt=0, description="Usable device memory in GiB (nvidia-smi total; perf-model §1)."
    )
    mem_fraction_static: float = Field(
        gt=0,
        le=1,
        description="Fraction of device memory for weights + KV pool (SGLang "
        "`--mem-fraction-static`; perf-model §2, §9 default 0.88).",
    )
    slack_gib: float = Field(
        ge=0,
        description="GiB inside the static fraction not available to KV (activations, CUDA "
        "graphs, fragmentation; perf-model §2 ~1.5 GiB [A]).",
    )


class ServedModelConfig(FrozenConfig):
    """One model as the simulator sees it: memory footprint and cost-model coefficients."""

    name: str = Field(description="Model label, e.g. 'qwen3-8b-like'.")
    weight_gib: float = Field(
        gt=0, description="BF16 weight bytes resident on the device, in GiB (perf-model §2)."
    )
    kv_bytes_per_token: int = Field(
        gt=0,
        description="KV-cache bytes per token: 2 × layers × KV heads × head_dim × bytes per "
        "element (perf-model §2).",
    )
    max_context_tokens: int = Field(
        gt=0, description="Longest sequence (prompt + output) the engine accepts, in tokens."
    )
    gpu: GpuConfig
    cost: CostModelConfig

    def kv_capacity_tokens(self, page_tokens: int) -> int:
        """Device KV pool in tokens (whole pages of `page_tokens`).

        Raises ValueError if the weights and slack leave no room for KV.
        """
        if page_tokens <= 0:
            raise ValueError(f"page_tokens must be positive, got {page_tokens}")
        free_bytes = (
            self.gpu.mem_fraction_static * self.gpu.memory_gib
            - self.weight_gib
            - self.gpu.slack_gib
        ) * _GIB
        tokens = int(free_bytes // self.kv_bytes_per_token)
        pages = tokens // page_tokens
        if pages <= 0:
            raise ValueError(
                f"{self.name} leaves no KV pool on {self.gpu.name}: "
                f"{self.gpu.mem_fraction_static} × {self.gpu.memory_gib} GiB − "
                f"{self.weight_gib} GiB weights − {self.gpu.slack_gib} GiB slack <= 0; "
                "raise mem_fraction_static or use a larger GPU"
            )
        return pages * page_tokens
