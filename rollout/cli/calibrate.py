"""`conductor calibrate gpu | validate | apply`: time the cost model's terms and whole steps on a
device, compare with the model config, write the calibrated coefficients back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
import yaml

from foundation.config import load_config, parse_config
from foundation.errors import ConductorError
from rollout.cli.console import console, fail

__all__ = ["app"]

app = typer.Typer(help="Calibrate the simulator's cost model on a GPU.", no_args_is_help=True)
CONFIGS = Path(__file__).parents[2] / "configs"
DEFAULT_CONFIG = CONFIGS / "calibrate" / "qwen3_8b.yaml"


def _load(config_path: Path, overrides: list[str] | None) -> Any:
    from rollout.simulation.calibration.config import CalibrationConfig

    try:
        return load_config(CalibrationConfig, config_path, overrides or [])
    except ConductorError as exc:
        fail(str(exc))


def _describe(fitted: Any) -> str:
    parts = []
    if fitted.t_fix_s is not None:
        parts.append(f"t_fix {fitted.t_fix_s * 1e3:.3f} ms")
    parts += [
        f"t_weights {fitted.t_weights_s * 1e3:.3f} ms",
        f"b_c {fitted.b_c_s * 1e6:.2f} µs/token",
    ]
    if fitted.b_tok_s is not None:
        parts.append(f"b_tok {fitted.b_tok_s * 1e6:.2f} µs/token")
    parts += [
        f"c_dec {fitted.c_dec_s * 1e9:.2f} ns/KV token",
        f"c_pf {fitted.c_pf_s * 1e9:.3f} ns/(token × context token)",
        f"H2D {fitted.h2d_bytes_per_s / 1e9:.1f} GB/s",
        f"D2H {fitted.d2h_bytes_per_s / 1e9:.1f} GB/s",
    ]
    return ", ".join(parts)


def _report_limits(fitted: Any, config: Any) -> tuple[Any, ...]:
    """Print each coefficient's implied rate; the ones above the device's peak."""
    from rollout.simulation.calibration.limits import implied_rates

    rates = implied_rates(fitted, config.shapes, config.device)
    for rate in rates:
        style = "bold red" if rate.exceeds else "dim"
        console.print(f"[{style}]{rate.describe()}[/]")
    return tuple(rate for rate in rates if rate.exceeds)


@app.command("gpu")
def calibrate_gpu(
    config_path: Path = typer.Option(
        DEFAULT_CONFIG, "--config", help="model shapes, device limits and sweeps (YAML)"
    ),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides of the config"),
    out: Path = typer.Option(Path("calibration.json"), help="where to write the timings"),
    device: str = typer.Option("cuda", help="torch device (cpu runs too, at tiny shapes)"),
) -> None:
    """Micro-benchmarks: GEMMs, decode and prefill attention, KV-page copies (torch only)."""
    from rollout.simulation.calibration.fit import fit_micro
    from rollout.simulation.calibration.measure import measure, open_bench, run_header

    config = _load(config_path, overrides)
    try:
        with console.status(f"measuring on {device} (at most {config.timing.time_budget_s:g} s)"):
            bench = open_bench(config, device=device)
            result = {**run_header(bench, config), **measure(bench, config)}
            result["skipped"] = bench.skipped
    except (RuntimeError, ValueError) as exc:
        fail(str(exc))
    out.write_text(json.dumps(result, indent=1) + "\n")
    fitted = fit_micro(result)
    console.print(f"measured on {result['device']}; timings in {out}")
    console.print(_describe(fitted))
    _report_limits(fitted, config)
    console.print(
        "these are the terms alone; `conductor calibrate validate` times whole steps and fits "
        "t_fix and b_tok too"
    )


@app.command("validate")
def calibrate_validate(
    config_path: Path = typer.Option(
        DEFAULT_CONFIG, "--config", help="model shapes, device limits and sweeps (YAML)"
    ),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides of the config"),
    out: Path = typer.Option(Path("calibration"), help="folder for the timings and the tables"),
    device: str = typer.Option("cuda", help="torch device (cpu runs too, at tiny shapes)"),
    model: Path | None = typer.Option(
        None, help="the configured model to compare (default: the config's model_path)"
    ),
) -> None:
    """Time whole steps, fit every coefficient, print predicted vs measured per row.

    Writes OUT/timings.json (every row), OUT/validate.md (the table) and
    OUT/<model>_calibrated.yaml (the model config with the fitted coefficients). Exits 1 when a
    fitted coefficient implies more than the device's peak (a broken measurement).
    """
    from rollout.engines.sim import ServedModelConfig
    from rollout.simulation.calibration.fit import apply_to_model, fit_calibration
    from rollout.simulation.calibration.limits import implied_rates
    from rollout.simulation.calibration.measure import measure, open_bench, run_header
    from rollout.simulation.calibration.steps import measure_steps
    from rollout.simulation.calibration.validate import compare, markdown, summary

    config = _load(config_path, overrides)
    model_path = model or (config_path.parent / config.model_path)
    try:
        configured = load_config(ServedModelConfig, model_path)
    except ConductorError as exc:
        fail(str(exc))
    if configured.kv_bytes_per_token != config.shapes.kv_bytes_per_token:
        fail(
            f"{model_path} holds {configured.kv_bytes_per_token:,} KV bytes per token, the "
            f"shapes of {config_path} {config.shapes.kv_bytes_per_token:,}: compare a model "
            "with its own shapes (--model)"
        )
    try:
        with console.status(f"timing on {device} (at most {config.timing.time_budget_s:g} s)"):
            bench = open_bench(config, device=device)
            result = {**run_header(bench, config), **measure(bench, config)}
            result["steps"] = measure_steps(bench, config.steps)
            result["skipped"] = bench.skipped
            fitted = fit_calibration(result)
    except (RuntimeError, ValueError) as exc:
        fail(str(exc))
    raw_model = yaml.safe_load(model_path.read_text())
    calibrated_raw = apply_to_model(raw_model, fitted)
    calibrated = parse_config(ServedModelConfig, calibrated_raw, source="the calibrated model")
    checks = compare(result["steps"], configured.cost, calibrated.cost)
    rates = implied_rates(fitted, config.shapes, config.device)
    table = markdown(
        checks,
        configured_name=model_path.name,
        max_decode_error=config.steps.max_decode_error,
        rates=rates,
    )
    result["fitted"] = fitted.coefficients() | {
        "h2d_bytes_per_s": fitted.h2d_bytes_per_s,
        "d2h_bytes_per_s": fitted.d2h_bytes_per_s,
    }
    result["summary"] = summary(checks, config.steps.max_decode_error)
    header = (
        f"Whole steps of {config_path.name} on {result['device']} ({result['measured_at']}, "
        f"torch {result['torch']}, {result['timing']}, median of {config.timing.repeats}).\n\n"
    )
    _write_validation(out, result, header + table, model_path, calibrated_raw)
    console.print(header + table)
    console.print(_describe(fitted))
    for skipped in bench.skipped:
        console.print(f"[yellow]skipped[/] {skipped}")
    console.print(f"timings, table and calibrated model in {out}/")
    impossible = [rate for rate in rates if rate.exceeds]
    if impossible:
        fail(
            "; ".join(rate.describe() for rate in impossible)
            + ": the measurement is broken (a cache, aliasing or skipped work); fix it before "
            "applying"
        )


def _write_validation(
    out: Path, result: dict[str, Any], table: str, model_path: Path, calibrated: Any
) -> None:
    """OUT/timings.json, OUT/validate.md and OUT/<model>_calibrated.yaml."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "timings.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "validate.md").write_text(table)
    target = out / f"{model_path.stem}_calibrated.yaml"
    target.write_text(
        _calibrated_header(model_path, result) + yaml.safe_dump(calibrated, sort_keys=False)
    )


def _calibrated_header(model: Path, result: dict[str, Any]) -> str:
    whole = "steps" in result
    return (
        f"# {model.name} with cost coefficients fitted by `conductor calibrate` from timings on "
        f"{result['device']} ({result['measured_at']}, torch {result['torch']}).\n"
        + (
            "# Every coefficient from whole steps except t_weights_s (the GEMM micro-benchmark).\n"
            if whole
            else "# t_fix_s and b_tok_s keep their configured values (they need whole steps).\n"
        )
    )


@app.command("apply")
def calibrate_apply(
    timings: Path = typer.Argument(..., help="the JSON of `calibrate gpu` or `calibrate validate`"),
    model: Path = typer.Option(..., help="the model config to calibrate (configs/model/*.yaml)"),
    out: Path | None = typer.Option(None, help="where to write it (default: <model>_calibrated)"),
) -> None:
    """Fit the cost coefficients and write a calibrated copy of the model config.

    Refuses a fit whose coefficients imply more than the device's peak bandwidth or FLOP/s.
    """
    from rollout.engines.sim import ServedModelConfig
    from rollout.simulation.calibration.config import CalibrationConfig
    from rollout.simulation.calibration.fit import apply_to_model, fit_calibration

    try:
        result = json.loads(timings.read_text())
        fitted = fit_calibration(result)
        raw = yaml.safe_load(model.read_text())
        config = parse_config(CalibrationConfig, result["config"], source=str(timings))
    except (OSError, ValueError, KeyError) as exc:
        fail(f"cannot read {timings} or {model}: {exc} (timings from an older version: re-run)")
    impossible = _report_limits(fitted, config)
    if impossible:
        fail("not applied: a coefficient implies more than the device can do (see above)")
    calibrated = apply_to_model(raw, fitted)
    target = out or model.with_name(f"{model.stem}_calibrated.yaml")
    target.write_text(
        _calibrated_header(model, result) + yaml.safe_dump(calibrated, sort_keys=False)
    )
    try:
        load_config(ServedModelConfig, target)
    except ConductorError as exc:
        fail(f"the calibrated config does not validate: {exc}")
    link = (fitted.h2d_bytes_per_s + fitted.d2h_bytes_per_s) / 2 / 1e9
    console.print(f"wrote {target}; the engine's link: configs/engine/sim.yaml link bandwidth "
                  f"≈ {link:.1f} GB/s (measured H2D/D2H mean)")  # fmt: skip
