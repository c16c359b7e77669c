"""`conductor serve-agent-api AGENT [CONFIG] [key=value ...]`: your own agent plays the run.

`conductor run` with `agent_api.agent` set: each sample attempt gets an OpenAI-compatible base
URL (`http://HOST:PORT/s/<token>/v1`) that its agent function receives in an `AgentContext`;
every chat completion there is a generation of that sample's trajectory, scheduled like any
turn, recorded token for token (docs/trainers.md, examples/openai_agent.py).
"""

from __future__ import annotations

from pathlib import Path

import typer

from rollout.cli.run import DEFAULT_RUN_CONFIG, run

__all__ = ["serve_agent_api"]


def serve_agent_api(
    agent: str = typer.Argument(
        ...,
        help="the agent: package.module:function or path/to/file.py:function, an async "
        "function of an AgentContext (e.g. examples/openai_agent.py:agent)",
    ),
    config: Path = typer.Argument(DEFAULT_RUN_CONFIG, help="run config (YAML)"),
    overrides: list[str] = typer.Argument(
        None, help="key=value overrides, e.g. steps=2 group_size=2 agent_api.port=8400"
    ),
    out: Path | None = typer.Option(None, help="parent of the run directory (default: out_dir)"),
    report: bool = typer.Option(True, help="write metrics.json and report.md in the run dir"),
) -> None:
    """SWE rollouts played by your own OpenAI-SDK agent, with exact token-level trajectories:
    the conductor serves each sample's chat completions and schedules them like its own."""
    extra = [*(overrides or []), f"agent_api.agent={agent}"]
    run(config, extra, out=out, report=report, resume=None, metrics_port=0)
