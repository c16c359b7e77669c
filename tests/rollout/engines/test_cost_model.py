"""The step-time cost model and the KV pool it implies (perf-model.md §3.1, §2, §9)."""

from __future__ import annotations

import pytest

from foundation.config import load_config
from rollout.engines.sim import (
    CostModelConfig,
    ServedModelConfig,
    decode_step_time_s,
    prefill_attention_units,
    step_time_s,
)
from rollout.engines.sim.cost_model import decode_step_cost
from tests.paths import CONFIGS

MODEL_CONFIGS = CONFIGS / "model"
COST = CostModelConfig(
    t_fix_s=0.001, t_weights_s=0.004, b_c_s=0.0001, b_tok_s=0.00001, c_dec_s=1e-8, c_pf_s=1e-9
)


def test_an_empty_step_takes_no_time() -> None:
    assert step_time_s(COST, decode_requests=0, decode_context_tokens=0) == 0.0


def test_small_batches_pay_the_weight_read_floor() -> None:
    assert decode_step_time_s(COST, 1, 0) == pytest.approx(0.001 + 0.004 + 0.00001)


def test_large_batches_are_compute_bound() -> None:
    assert step_time_s(COST, decode_requests=0, decode_context_tokens=0, prefill_tokens=100) == (
        pytest.approx(0.001 + 100 * 0.0001 + 100 * 0.00001)
    )


def test_decode_pays_for_every_kv_token_read() -> None:
    extra = decode_step_time_s(COST, 4, 1_000_000) - decode_step_time_s(COST, 4, 0)
    assert extra == pytest.approx(1_000_000 * 1e-8)


@pytest.mark.parametrize("model", ["qwen3_8b_h200.yaml", "qwen3_32b_h200.yaml"])
def test_the_split_decode_step_cost_is_bit_identical_to_the_step_time(model: str) -> None:
    cost = load_config(ServedModelConfig, MODEL_CONFIGS / model).cost
    for costs in (cost, COST):
        for batch in (0, 1, 2, 7, 31, 32, 33, 64, 100, 255, 256):
            fixed_s, per_kv_token_s = decode_step_cost(costs, batch)
            for context in (0, 1, 4_095, 123_457, 2_000_003):
                step_s = decode_step_time_s(costs, batch, context)
                assert fixed_s + per_kv_token_s * context == step_s  # exact, not approx


def test_prefill_attention_is_causal_over_the_prefix_and_the_chunk() -> None:
    assert prefill_attention_units(new_tokens=100, prefix_tokens=1000) == 100 * (1000 + 50)


@pytest.mark.parametrize(
    ("file", "pool_tokens"), [("qwen3_8b_h200.yaml", 774_720), ("qwen3_32b_h200.yaml", 248_576)]
)
def test_the_shipped_models_leave_the_kv_pools_of_perf_model_section_9(
    file: str, pool_tokens: int
) -> None:
    model = load_config(ServedModelConfig, MODEL_CONFIGS / file)
    assert model.kv_capacity_tokens(page_tokens=64) == pool_tokens


@pytest.mark.parametrize(
    ("batch", "context", "prefill_tokens", "measured_s"),
    [(1, 1024, 0, 5.68e-3), (32, 4096, 0, 10.81e-3), (64, 16384, 0, 40.76e-3),
     (128, 16384, 0, 76.50e-3), (0, 0, 8192, 253.1e-3)],
)  # fmt: skip
def test_the_8b_model_predicts_the_h200_whole_steps_of_issue_31_within_10_percent(
    batch: int, context: int, prefill_tokens: int, measured_s: float
) -> None:
    """Whole Qwen3-8B steps in a CUDA graph on one H200 (issue 31): decode of `batch` requests
    over `context` tokens each, or a fresh prefill chunk."""
    model = load_config(ServedModelConfig, MODEL_CONFIGS / "qwen3_8b_h200.yaml")
    predicted_s = step_time_s(
        model.cost,
        decode_requests=batch,
        decode_context_tokens=batch * context,
        prefill_tokens=prefill_tokens,
        prefill_attention=prefill_attention_units(prefill_tokens, 0),
    )
    assert predicted_s == pytest.approx(measured_s, rel=0.10)


def test_a_model_too_big_for_its_gpu_is_rejected_with_the_arithmetic() -> None:
    model = load_config(
        ServedModelConfig, MODEL_CONFIGS / "qwen3_32b_h200.yaml", ["weight_gib=200"]
    )
    with pytest.raises(ValueError, match="no KV pool"):
        model.kv_capacity_tokens(page_tokens=64)
