"""What each fitted coefficient implies about the device, against what the device can do (pure).

A coefficient is a time per unit of work; the work's bytes or FLOPs over it is a rate the
device must have delivered. A rate above the device's peak means the measurement read from a
cache or skipped work, not that the device is fast (issue 31: c_dec 17.57 ns per KV token of
Qwen3-8B implies 8.4 TB/s of KV reads on a 4.8 TB/s H200, because K and V were one tensor).

| coefficient | work per unit | limit |
|---|---|---|
| `t_weights_s` | every GEMM weight and the LM head, once | memory bandwidth |
| `c_dec_s` | one token's K and V over all layers | memory bandwidth |
| `b_c_s` | 2 FLOPs per layer weight parameter per token | peak FLOP/s |
| `c_pf_s` | 4 · layers · H_q · head_dim FLOPs per (token × context token) | peak FLOP/s |

A coefficient of 0 implies an infinite rate: it exceeds every limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollout.simulation.calibration.config import DeviceLimits, ModelShapes
from rollout.simulation.calibration.fit import FittedCost

__all__ = ["ImpliedRate", "implied_rates", "over_limits"]


@dataclass(frozen=True, slots=True)
class ImpliedRate:
    """The rate `coefficient` implies (`per_s` units of `unit`) and the device's limit."""

    coefficient: str
    per_s: float
    limit_per_s: float
    unit: str

    @property
    def exceeds(self) -> bool:
        """Whether the implied rate is above the device's peak."""
        return self.per_s > self.limit_per_s

    @property
    def share(self) -> float:
        """The implied rate as a share of the limit (above 1: impossible)."""
        return self.per_s / self.limit_per_s

    def describe(self) -> str:
        """'c_dec_s implies 8.39 TB/s, 175 % of the device's 4.80 TB/s'."""
        prefix = "TFLOP/s" if self.unit == "FLOP" else "TB/s"
        return (
            f"{self.coefficient} implies {self.per_s / 1e12:.2f} {prefix}, "
            f"{self.share:.0%} of the device's {self.limit_per_s / 1e12:.2f} {prefix}"
        )


def _rate(work: float, seconds: float) -> float:
    return work / seconds if seconds > 0 else float("inf")


def implied_rates(
    fitted: FittedCost, shapes: ModelShapes, device: DeviceLimits
) -> tuple[ImpliedRate, ...]:
    """Each fitted coefficient's implied rate against `device` (see the module table)."""
    bandwidth = device.memory_bandwidth_gb_per_s * 1e9
    flops = device.peak_tflops * 1e12
    weight_bytes = shapes.weight_params * shapes.dtype_bytes
    dense_flops = 2 * shapes.layers * shapes.layer_weight_params
    return (
        ImpliedRate("t_weights_s", _rate(weight_bytes, fitted.t_weights_s), bandwidth, "B"),
        ImpliedRate("c_dec_s", _rate(shapes.kv_bytes_per_token, fitted.c_dec_s), bandwidth, "B"),
        ImpliedRate("b_c_s", _rate(dense_flops, fitted.b_c_s), flops, "FLOP"),
        ImpliedRate("c_pf_s", _rate(shapes.prefill_flops_per_unit, fitted.c_pf_s), flops, "FLOP"),
    )


def over_limits(
    fitted: FittedCost, shapes: ModelShapes, device: DeviceLimits
) -> tuple[ImpliedRate, ...]:
    """The implied rates above the device's limits (empty: the fit is physically possible)."""
    return tuple(rate for rate in implied_rates(fitted, shapes, device) if rate.exceeds)
