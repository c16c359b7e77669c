"""The step-time cost model: how long one continuous-batching forward takes (perf-model.md §3, §9).

    t_step = t_fix + max(t_weights, N·b_c) + b_tok·N + c_dec·ΣL_decode + c_pf·Σ n_j(p_j + n_j/2)

N is the number of tokens through the dense layers (one per decoding request plus every prefill
token), ΣL_decode the KV tokens the decoding requests read, and (n_j, p_j) each prefill chunk's
new tokens and the tokens already in KV before it. Pure functions over a frozen config.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field

from foundation.config import FrozenConfig

__all__ = [
    "CostModelConfig",
    "DecodeStepCost",
    "decode_step_cost",
    "decode_step_time_s",
    "forward_fixed_s",
    "prefill_attention_units",
    "step_time_s",
]


class CostModelConfig(FrozenConfig):
    """Coefficients of the step-time model for one model on one GPU (perf-model.md §9.1)."""

    t_fix_s: float = Field(
        ge=0,
        description="Seconds per step not hidden by the overlap scheduler: kernel launch, "
        "sampling, scheduling (perf-model §9.1 `t_fix`, [A]).",
    )
    t_weights_s: float = Field(
        ge=0,
        description="Seconds to stream the weights once from HBM: the floor of every step "
        "(perf-model §3.3, §9.1 `t_w`).",
    )
    b_c_s: float = Field(
        ge=0,
        description="Seconds per token through the dense layers when compute-bound, "
        "2·P_active / achieved FLOP/s (perf-model §3.2, §9.1 `b_c`).",
    )
    b_tok_s: float = Field(
        ge=0,
        description="Seconds per token of non-GEMM work: norms, rope, KV write, sampling "
        "(perf-model §3.2 flat-region slope, §9.1 `b_tok`).",
    )
    c_dec_s: float = Field(
        ge=0,
        description="Seconds per KV token read by a decoding request per step: KV bytes per "
        "token / attention bandwidth (perf-model §3.5, §9.1 `c_dec`).",
    )
    c_pf_s: float = Field(
        ge=0,
        description="Seconds per (new token × context token) of causal prefill attention: "
        "4·layers·H_q·head_dim / attention FLOP/s (perf-model §3.6, §9.1 `c_pf`).",
    )


def prefill_attention_units(new_tokens: int, prefix_tokens: int) -> float:
    """The causal attention work of one prefill chunk, `n·(p + n/2)` (token × context pairs)."""
    return new_tokens * (prefix_tokens + new_tokens / 2)


def step_time_s(
    cost: CostModelConfig,
    *,
    decode_requests: int,
    decode_context_tokens: int,
    prefill_tokens: int = 0,
    prefill_attention: float = 0.0,
) -> float:
    """Seconds of one forward.

    Args:
        decode_requests: requests that produce one token each in this step.
        decode_context_tokens: ΣL over those requests (KV tokens each reads).
        prefill_tokens: Σn, new prompt tokens computed in this step (all chunks).
        prefill_attention: Σ n(p + n/2) over the chunks (`prefill_attention_units`).

    Returns 0 for an empty step (nothing runs).
    """
    tokens = decode_requests + prefill_tokens
    if tokens == 0:
        return 0.0
    return (
        forward_fixed_s(cost, tokens)
        + cost.b_tok_s * tokens
        + cost.c_dec_s * decode_context_tokens
        + cost.c_pf_s * prefill_attention
    )


def forward_fixed_s(cost: CostModelConfig, tokens: int) -> float:
    """The part of a forward of `tokens` tokens that does not grow with its tokens' work: the
    launch and the weight read (or the compute of its tokens, if larger). `step_time_s` starts
    with it, so it is the same float there and here."""
    return cost.t_fix_s + max(cost.t_weights_s, tokens * cost.b_c_s)


def decode_step_time_s(cost: CostModelConfig, batch: int, context_tokens: int) -> float:
    """Seconds of a decode-only step of `batch` requests reading `context_tokens` KV in total."""
    return step_time_s(cost, decode_requests=batch, decode_context_tokens=context_tokens)


class DecodeStepCost(NamedTuple):
    """`decode_step_time_s` of one batch size as `fixed_s + per_kv_token_s × context_tokens`.

    Bit-identical to it: `step_time_s` adds its terms left to right, so everything before the
    KV-read term is the same float for every step of a fixed batch (and the prefill term it
    adds last is exactly 0.0). A decode block plans tens of steps per batch; this spares
    recomputing the constant part of each (`batching.plan_decode_block`).
    """

    fixed_s: float
    per_kv_token_s: float


def decode_step_cost(cost: CostModelConfig, batch: int) -> DecodeStepCost:
    """The decode-step time of `batch` requests, split as `DecodeStepCost` says (0 for none)."""
    if batch == 0:
        return DecodeStepCost(0.0, 0.0)
    return DecodeStepCost(forward_fixed_s(cost, batch) + cost.b_tok_s * batch, cost.c_dec_s)
