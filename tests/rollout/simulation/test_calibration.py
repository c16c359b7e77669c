"""`conductor calibrate`: the fits recover known coefficients, the benchmarks read K and V as
two tensors from buffers of their own, impossible coefficients are refused, and the whole
pipeline runs on CPU at tiny shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from foundation.config import load_config
from rollout.cli.calibrate import app
from rollout.engines.sim import ServedModelConfig
from rollout.simulation.calibration.config import CalibrationConfig, StepShape
from rollout.simulation.calibration.decoder import buffer_sets, sdpa_attention
from rollout.simulation.calibration.fit import (
    FittedCost,
    fit_calibration,
    fit_micro,
    fit_steps,
    least_squares,
    nonnegative_least_squares,
)
from rollout.simulation.calibration.limits import over_limits
from rollout.simulation.calibration.measure import measure, open_bench
from rollout.simulation.calibration.steps import measure_steps
from tests.paths import CONFIGS

TINY = CONFIGS / "calibrate" / "tiny_cpu.yaml"
QWEN3_8B = CONFIGS / "calibrate" / "qwen3_8b.yaml"


def synthetic() -> dict[str, Any]:
    """Micro timings made from known coefficients: the fit must give them back."""
    t_w, b_c, c_dec, c_pf, bandwidth = 4e-3, 2e-5, 4e-8, 1e-9, 50e9
    return {
        "gemm": [{"tokens": n, "seconds": max(t_w, n * b_c)} for n in (1, 8, 64, 512, 1024, 4096)],
        "decode": [{"batch": b, "context": L, "seconds": 1e-5 + c_dec * b * L}
                   for b in (1, 8, 64) for L in (1024, 8192)],
        "prefill": [{"new": n, "prefix": p, "seconds": 2e-5 + c_pf * n * (p + n / 2)}
                    for n in (512, 2048) for p in (0, 8192)],
        "link": [{"direction": d, "bytes": size, "seconds": 1e-5 + size / bandwidth}
                 for d in ("h2d", "d2h") for size in (10**6, 10**8)],
    }  # fmt: skip


def whole_steps(t_fix: float, b_tok: float, c_dec: float, c_pf: float) -> list[dict[str, Any]]:
    """Whole-step rows priced on the cost model's form with the synthetic micro terms."""
    rows = []
    shapes = [
        StepShape(decode_batch=b, decode_context=L) for b in (1, 32, 128) for L in (1024, 16384)
    ]
    shapes += [StepShape(prefill_chunk=n, prefill_prefix=p) for n in (512, 8192) for p in (0, 8192)]
    for step in shapes:
        units = step.prefill_chunk * (step.prefill_prefix + step.prefill_chunk / 2)
        seconds = (
            t_fix + max(4e-3, step.tokens * 2e-5) + b_tok * step.tokens
            + c_dec * step.decode_batch * step.decode_context + c_pf * units
        )  # fmt: skip
        rows.append({"kind": step.kind, "decode_batch": step.decode_batch,
                     "decode_context": step.decode_context, "prefill_chunk": step.prefill_chunk,
                     "prefill_prefix": step.prefill_prefix, "seconds": seconds})  # fmt: skip
    return rows


def test_the_micro_fit_recovers_the_coefficients_that_made_the_timings() -> None:
    fitted = fit_micro(synthetic())
    assert fitted.t_weights_s == pytest.approx(4e-3)
    assert fitted.b_c_s == pytest.approx(2e-5)
    assert fitted.c_dec_s == pytest.approx(4e-8)
    assert fitted.c_pf_s == pytest.approx(1e-9)
    assert fitted.h2d_bytes_per_s == pytest.approx(50e9) == fitted.d2h_bytes_per_s
    assert fitted.t_fix_s is None and fitted.b_tok_s is None


def test_whole_steps_give_t_fix_b_tok_c_dec_and_c_pf_back() -> None:
    rows = whole_steps(t_fix=1.1e-3, b_tok=3.4e-6, c_dec=3.35e-8, c_pf=2.4e-9)
    fitted = fit_calibration({**synthetic(), "steps": rows})
    assert fitted.t_fix_s == pytest.approx(1.1e-3)
    assert fitted.b_tok_s == pytest.approx(3.4e-6)
    assert fitted.c_dec_s == pytest.approx(3.35e-8)
    assert fitted.c_pf_s == pytest.approx(2.4e-9)
    assert fitted.t_weights_s == pytest.approx(4e-3)  # the GEMM micro term stays


def test_the_step_fit_ignores_the_held_out_mixed_rows() -> None:
    rows = whole_steps(t_fix=1e-3, b_tok=3e-6, c_dec=3e-8, c_pf=2e-9)
    mixed = {"kind": "mixed", "decode_batch": 8, "decode_context": 4096, "prefill_chunk": 512,
             "prefill_prefix": 0, "seconds": 1.0}  # fmt: skip
    micro = fit_micro(synthetic())
    assert fit_steps([*rows, mixed], micro) == fit_steps(rows, micro)


def test_a_coefficient_that_would_be_negative_is_zero_and_the_rest_refit() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    ys = [2.0 * x - 0.5 for x in xs]  # the best intercept is negative
    intercept, slope = nonnegative_least_squares([[1.0] * 4, xs], ys, [1.0] * 4)
    assert intercept == 0.0 and slope == pytest.approx(
        sum(x * y for x, y in zip(xs, ys, strict=True)) / 30
    )


def test_a_line_needs_two_distinct_points() -> None:
    with pytest.raises(ValueError, match="two distinct"):
        least_squares([1.0, 1.0], [2.0, 3.0])


# -- no K/V aliasing, no L2-resident reuse --------------------------------------------------


class RecordingAttention:
    """The real attention kernel, recording the storage of every K and V it is given."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, q: Any, k: Any, v: Any, *, causal: bool) -> Any:
        self.calls.append((k.untyped_storage().data_ptr(), v.untyped_storage().data_ptr()))
        return sdpa_attention(q, k, v, causal=causal)


@pytest.fixture(scope="module")
def tiny() -> CalibrationConfig:
    return load_config(CalibrationConfig, TINY)


def test_every_benchmark_gives_attention_k_and_v_in_distinct_storage(
    tiny: CalibrationConfig,
) -> None:
    """Issue 31: `scaled_dot_product_attention(q, kv, kv)` read each KV block once."""
    attention = RecordingAttention()
    bench = open_bench(tiny, device="cpu", attention=attention)
    measure(bench, tiny)
    measure_steps(bench, tiny.steps)
    assert attention.calls, "nothing was timed"
    aliased = [call for call in attention.calls if call[0] == call[1]]
    assert not aliased, f"{len(aliased)} of {len(attention.calls)} calls got K and V aliased"


def test_each_layer_of_a_step_reads_its_own_k_and_v(tiny: CalibrationConfig) -> None:
    attention = RecordingAttention()
    bench = open_bench(tiny, device="cpu", attention=attention)
    bench.decoder.step(StepShape(decode_batch=2, decode_context=64))()
    storages = [pointer for call in attention.calls for pointer in call]
    assert len(attention.calls) == tiny.shapes.layers
    assert len(set(storages)) == 2 * tiny.shapes.layers


def test_layers_share_buffers_only_in_a_cycle_bigger_than_the_l2() -> None:
    mib, gib = 1 << 20, 1 << 30

    def sets(per_layer_bytes: int, budget_bytes: int) -> int:
        return buffer_sets(
            layers=36, per_layer_bytes=per_layer_bytes, budget_bytes=budget_bytes,
            flush_bytes=256 * mib,
        )  # fmt: skip

    assert sets(mib, 100 * mib) == 36  # every layer its own
    assert sets(8 * gib, 100 * gib) == 12  # a cycle of 96 GiB: nothing of it left in the L2
    with pytest.raises(ValueError, match="stay in the L2"):
        sets(10 * mib, 30 * mib)
    with pytest.raises(ValueError, match="exceed the memory budget"):
        sets(2 * gib, gib)


# -- what a coefficient may imply ------------------------------------------------------------


def issue_31(c_dec_s: float) -> FittedCost:
    """The H200 fit of issue 31 (Qwen3-8B) with the given c_dec."""
    return FittedCost(t_weights_s=4.688e-3, b_c_s=17.43e-6, c_dec_s=c_dec_s, c_pf_s=2.446e-9,
                      h2d_bytes_per_s=55.4e9, d2h_bytes_per_s=55.4e9)  # fmt: skip


def test_a_c_dec_faster_than_the_devices_bandwidth_is_over_the_limit() -> None:
    """17.57 ns per 147,456-byte KV token is 8.4 TB/s on a 4.8 TB/s H200: K and V read once."""
    config = load_config(CalibrationConfig, QWEN3_8B)
    (over,) = over_limits(issue_31(17.57e-9), config.shapes, config.device)
    assert over.coefficient == "c_dec_s" and over.per_s == pytest.approx(8.39e12, rel=1e-2)
    assert over_limits(issue_31(33.5e-9), config.shapes, config.device) == ()


def test_the_shipped_model_configs_are_within_their_devices_limits() -> None:
    for calibrate, model in (("qwen3_8b.yaml", "qwen3_8b_h200.yaml"),
                             ("qwen3_32b.yaml", "qwen3_32b_h200.yaml")):  # fmt: skip
        config = load_config(CalibrationConfig, CONFIGS / "calibrate" / calibrate)
        cost = load_config(ServedModelConfig, CONFIGS / "model" / model).cost
        fitted = FittedCost(
            t_weights_s=cost.t_weights_s, b_c_s=cost.b_c_s, c_dec_s=cost.c_dec_s,
            c_pf_s=cost.c_pf_s, h2d_bytes_per_s=1.0, d2h_bytes_per_s=1.0,
        )  # fmt: skip
        assert over_limits(fitted, config.shapes, config.device) == (), model


def test_apply_refuses_timings_whose_c_dec_exceeds_the_bandwidth(tmp_path: Path) -> None:
    config = load_config(CalibrationConfig, QWEN3_8B)
    timings = synthetic()
    kv_bytes = config.shapes.kv_bytes_per_token
    # c_dec of 17.57 ns per KV token, as the aliased benchmark measured on the H200
    timings["decode"] = [{"batch": b, "context": L, "seconds": 1e-5 + 17.57e-9 * b * L}
                         for b in (1, 8, 64) for L in (1024, 8192)]  # fmt: skip
    # micro terms at rates the H200 can deliver, so c_dec is the one over the limit
    params = config.shapes.weight_params
    timings["gemm"] = [{"tokens": n, "seconds": max(params * 2 / 3e12, n * 2 * params / 7e14)}
                       for n in (1, 64, 1024, 4096)]  # fmt: skip
    timings["prefill"] = [{"new": n, "prefix": p, "seconds": 2.5e-9 * n * (p + n / 2)}
                          for n in (512, 2048) for p in (0, 8192)]  # fmt: skip
    timings["config"] = config.model_dump(mode="json")
    path = tmp_path / "timings.json"
    path.write_text(json.dumps(timings))
    target = tmp_path / "calibrated.yaml"
    model = CONFIGS / "model" / "qwen3_8b_h200.yaml"
    done = CliRunner().invoke(
        app, ["apply", str(path), "--model", str(model), "--out", str(target)]
    )
    assert done.exit_code != 0 and "c_dec_s implies" in done.output and kv_bytes == 147_456
    assert not target.exists()


# -- the CLI end to end on CPU ---------------------------------------------------------------


def test_validate_on_cpu_times_whole_steps_and_writes_the_table_and_the_calibrated_model(
    tmp_path: Path,
) -> None:
    out = tmp_path / "validate"
    done = CliRunner().invoke(
        app, ["validate", "--config", str(TINY), "--device", "cpu", "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    result = json.loads((out / "timings.json").read_text())
    tiny = load_config(CalibrationConfig, TINY)
    assert len(result["steps"]) == len(tiny.steps.shapes())
    assert {row["kind"] for row in result["steps"]} == {"decode", "prefill", "mixed"}
    table = (out / "validate.md").read_text()
    assert table.count("| decode |") == len(tiny.steps.decode_batches) * len(
        tiny.steps.decode_contexts
    )
    assert "held out" in table and "implied rate" in table
    calibrated = load_config(ServedModelConfig, out / "tiny_cpu_model_calibrated.yaml")
    assert calibrated.cost.t_fix_s == pytest.approx(result["fitted"]["t_fix_s"])
    assert calibrated.cost.c_dec_s == pytest.approx(result["fitted"]["c_dec_s"])


def test_a_micro_sweep_on_cpu_then_apply_writes_a_valid_calibrated_model(tmp_path: Path) -> None:
    timings = tmp_path / "calibration.json"
    runner = CliRunner()
    done = runner.invoke(
        app, ["gpu", "--config", str(TINY), "--device", "cpu", "--out", str(timings)]
    )
    assert done.exit_code == 0, done.output
    result = json.loads(timings.read_text())
    assert {len(result[key]) > 0 for key in ("gemm", "decode", "prefill", "link")} == {True}
    model = CONFIGS / "calibrate" / "tiny_cpu_model.yaml"
    target = tmp_path / "calibrated.yaml"
    done = runner.invoke(app, ["apply", str(timings), "--model", str(model), "--out", str(target)])
    assert done.exit_code == 0, done.output
    calibrated = load_config(ServedModelConfig, target)
    assert calibrated.cost.t_weights_s == pytest.approx(fit_micro(result).t_weights_s)
    assert calibrated.cost.t_fix_s == load_config(ServedModelConfig, model).cost.t_fix_s


def test_without_a_gpu_the_default_device_says_what_to_do() -> None:
    done = CliRunner().invoke(app, ["gpu", "--config", str(TINY)])
    assert done.exit_code != 0 and "no CUDA device" in done.output


def test_validate_refuses_a_model_of_other_shapes(tmp_path: Path) -> None:
    model = CONFIGS / "model" / "qwen3_32b_h200.yaml"
    arguments = ["validate", "--config", str(QWEN3_8B), "--model", str(model)]
    done = CliRunner().invoke(app, [*arguments, "--device", "cpu", "--out", str(tmp_path)])
    assert done.exit_code != 0 and "its own shapes" in done.output
