"""Assembles the `conductor` command from its sub-command modules."""

from __future__ import annotations

import importlib.metadata
import logging

import typer

from rollout.cli import bench, calibrate, envs, images, trace, workload
from rollout.cli.replay import replay
from rollout.cli.report import report
from rollout.cli.run import run
from rollout.cli.serve import serve_sglang, serve_sim
from rollout.cli.serve_agent import serve_agent_api
from rollout.cli.simulate import simulate

__all__ = ["app", "main"]

app = typer.Typer(
    name="conductor",
    help=(
        "AIO Batch Conductor: agentic-RL rollouts with Docker envs, critical-group scheduling "
        "and a priority-aware KV cache.\n\nStart with `conductor run` (the embedded default)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"conductor (aio-conductor) {_version()}")
        raise typer.Exit()


def _version() -> str:
    try:
        return importlib.metadata.version("aio-conductor")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


@app.callback()
def _main(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="print the version and exit",
    ),
) -> None:
    """AIO Batch Conductor: agentic-RL rollouts with Docker envs, critical-group scheduling and
    a priority-aware KV cache. Start with `conductor run` (the embedded default)."""


app.command("run")(run)
app.command("report")(report)
app.command("replay")(replay)
app.command("simulate")(simulate)
app.command("serve-sim")(serve_sim)
app.command("serve-sglang")(serve_sglang)
app.command("serve-agent-api")(serve_agent_api)
app.add_typer(images.app, name="images")
app.add_typer(envs.app, name="envs")
app.add_typer(bench.app, name="bench")
app.add_typer(calibrate.app, name="calibrate")
app.add_typer(trace.app, name="trace")
app.add_typer(workload.app, name="workload")


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()
