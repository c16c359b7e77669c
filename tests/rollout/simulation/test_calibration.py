"""`conductor calibrate`: the fits recover known coefficients; the sweep and apply run on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foundation.config import load_config
from rollout.cli.calibrate import app
from rollout.engines.sim import ServedModelConfig
from rollout.simulation.calibration.fit import fit_calibration, least_squares
from tests.paths import CONFIGS


def synthetic() -> dict[str, object]:
    """Timings made from known coefficients: the fit must give them back."""
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


def test_the_fit_recovers_the_coefficients_that_made_the_timings() -> None:
    fitted = fit_calibration(synthetic())
    assert fitted.t_weights_s == pytest.approx(4e-3)
    assert fitted.b_c_s == pytest.approx(2e-5)
    assert fitted.c_dec_s == pytest.approx(4e-8)
    assert fitted.c_pf_s == pytest.approx(1e-9)
    assert fitted.h2d_bytes_per_s == pytest.approx(50e9) == fitted.d2h_bytes_per_s


def test_a_line_needs_two_distinct_points() -> None:
    with pytest.raises(ValueError, match="two distinct"):
        least_squares([1.0, 1.0], [2.0, 3.0])


def test_a_quick_cpu_sweep_then_apply_writes_a_valid_calibrated_model(tmp_path: Path) -> None:
    timings = tmp_path / "calibration.json"
    runner = CliRunner()
    done = runner.invoke(app, ["gpu", "--device", "cpu", "--quick", "--out", str(timings)])
    assert done.exit_code == 0, done.output
    result = json.loads(timings.read_text())
    assert {len(result[key]) > 0 for key in ("gemm", "decode", "prefill", "link")} == {True}
    model = CONFIGS / "model" / "qwen3_8b_h200.yaml"
    target = tmp_path / "calibrated.yaml"
    done = runner.invoke(app, ["apply", str(timings), "--model", str(model), "--out", str(target)])
    assert done.exit_code == 0, done.output
    calibrated = load_config(ServedModelConfig, target)
    fitted = fit_calibration(result)
    assert calibrated.cost.t_weights_s == pytest.approx(fitted.t_weights_s)
    assert calibrated.cost.t_fix_s == load_config(ServedModelConfig, model).cost.t_fix_s


def test_without_a_gpu_the_default_device_says_what_to_do() -> None:
    done = CliRunner().invoke(app, ["gpu", "--quick"])
    assert done.exit_code != 0 and "no CUDA device" in done.output
