"""`conductor calibrate gpu | apply`: measure the cost model's terms on a GPU, write them back."""

from __future__ import annotations

import json
from pathlib import Path

import typer
import yaml

from foundation.config import load_config
from foundation.errors import ConductorError
from rollout.cli.console import console, fail

__all__ = ["app"]

app = typer.Typer(help="Calibrate the simulator's cost model on a GPU.", no_args_is_help=True)
CONFIGS = Path(__file__).parents[2] / "configs"


@app.command("gpu")
def calibrate_gpu(
    shapes: Path = typer.Option(
        CONFIGS / "calibrate" / "qwen3_8b.yaml", help="model shapes and sweep (YAML)"
    ),
    out: Path = typer.Option(Path("calibration.json"), help="where to write the timings"),
    device: str = typer.Option("cuda", help="torch device (cpu runs too, for a dry run)"),
    quick: bool = typer.Option(False, help="tiny shapes and sweep: a smoke test in seconds"),
) -> None:
    """Time GEMMs, decode and prefill attention and KV-page copies (torch only, < 5 minutes)."""
    from rollout.simulation.calibration.fit import fit_calibration
    from rollout.simulation.calibration.measure import CalibrationConfig, measure
    from rollout.simulation.calibration.measure import quick as quick_sweep

    try:
        config = load_config(CalibrationConfig, shapes)
    except ConductorError as exc:
        fail(str(exc))
    if quick:
        config = quick_sweep(config)
    try:
        with console.status(f"measuring on {device} (at most {config.time_budget_s:g} s)"):
            result = measure(config, device=device)
    except RuntimeError as exc:
        fail(str(exc))
    out.write_text(json.dumps(result, indent=1) + "\n")
    fitted = fit_calibration(result)
    console.print(f"measured on {result['device']}; timings in {out}")
    console.print(
        f"t_weights {fitted.t_weights_s * 1e3:.3f} ms, b_c {fitted.b_c_s * 1e6:.2f} µs/token, "
        f"c_dec {fitted.c_dec_s * 1e9:.2f} ns/KV token, c_pf {fitted.c_pf_s * 1e12:.3f} ps, "
        f"H2D {fitted.h2d_bytes_per_s / 1e9:.1f} GB/s, D2H {fitted.d2h_bytes_per_s / 1e9:.1f} GB/s"
    )
    console.print(f"next: conductor calibrate apply {out} --model configs/model/<model>.yaml")


@app.command("apply")
def calibrate_apply(
    timings: Path = typer.Argument(..., help="the JSON written by `conductor calibrate gpu`"),
    model: Path = typer.Option(..., help="the model config to calibrate (configs/model/*.yaml)"),
    out: Path | None = typer.Option(None, help="where to write it (default: <model>_calibrated)"),
) -> None:
    """Fit the cost coefficients and write a calibrated copy of the model config."""
    from rollout.engines.sim import ServedModelConfig
    from rollout.simulation.calibration.fit import apply_to_model, fit_calibration

    try:
        result = json.loads(timings.read_text())
        fitted = fit_calibration(result)
        raw = yaml.safe_load(model.read_text())
    except (OSError, ValueError, KeyError) as exc:
        fail(f"cannot read {timings} or {model}: {exc}")
    calibrated = apply_to_model(raw, fitted)
    target = out or model.with_name(f"{model.stem}_calibrated.yaml")
    header = (
        f"# {model.name} with cost coefficients fitted by `conductor calibrate apply` from "
        f"timings on {result['device']} ({result['measured_at']}, torch {result['torch']}).\n"
        "# t_fix_s and b_tok_s keep their configured values (they need a full engine).\n"
    )
    target.write_text(header + yaml.safe_dump(calibrated, sort_keys=False))
    try:
        load_config(ServedModelConfig, target)
    except ConductorError as exc:
        fail(f"the calibrated config does not validate: {exc}")
    link = (fitted.h2d_bytes_per_s + fitted.d2h_bytes_per_s) / 2 / 1e9
    console.print(f"wrote {target}; the engine's link: configs/engine/sim.yaml link bandwidth "
                  f"≈ {link:.1f} GB/s (measured H2D/D2H mean)")  # fmt: skip
