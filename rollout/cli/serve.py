"""`conductor serve-sim [CONFIG] [key=value ...]`: the simulated engine behind SGLang's HTTP API."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import typer

from harness.config import load_config
from harness.errors import HarnessError
from rollout.cli.console import config_and_overrides, console, fail
from rollout.jobs.serve_sim import ServeSimConfig, serve_forever

__all__ = ["serve_sim"]

DEFAULT_SERVE_SIM_CONFIG = Path(__file__).parents[2] / "configs/serve_sim/default.yaml"


def serve_sim(
    config: Path = typer.Argument(DEFAULT_SERVE_SIM_CONFIG, help="serve-sim config (YAML)"),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. port=30001"),
) -> None:
    """Serve the simulated engine on SGLang's HTTP API (/generate, abort, pause, weights, ...).

    Wall-clock paced on the cost model; scripted SWE agents answer prompts of the shipped SWE
    tasks, filler text answers the rest. Point the SGLang engine client or SGLang's own HTTP
    test kits at it. Stop it with Ctrl-C.
    """
    config, extra = config_and_overrides(config, overrides, DEFAULT_SERVE_SIM_CONFIG)
    try:
        settings = load_config(ServeSimConfig, config, extra)
    except HarnessError as exc:
        fail(str(exc))

    def ready(port: int) -> None:
        console.print(
            f"serving the simulated engine on http://{settings.host}:{port} "
            f"(SGLang 0.5.23 HTTP API; SIMULATED timing, model {settings.served_model_name})",
            soft_wrap=True,
        )

    with contextlib.suppress(KeyboardInterrupt):
        try:
            asyncio.run(serve_forever(settings, config.parent, on_ready=ready))
        except OSError as exc:
            fail(f"cannot listen on {settings.host}:{settings.port} ({exc}); pick another port=")
