"""`conductor envs ...`: housekeeping of env sandboxes."""

from __future__ import annotations

import typer

from harness.errors import HarnessError
from harness.reaper import reap_containers
from harness.sandbox.docker import docker_client
from rollout.cli.console import console, fail

__all__ = ["app"]

app = typer.Typer(help="Manage env sandboxes (containers).", no_args_is_help=True)


@app.command("reap")
def reap(
    all_containers: bool = typer.Option(
        False, "--all", help="remove every project container, even those of live owners"
    ),
) -> None:
    """Remove project containers whose owner process is gone or whose TTL has passed."""
    try:
        report = reap_containers(docker_client(), remove_all=all_containers)
    except HarnessError as exc:
        fail(str(exc))
    for container_id, reason in report.removed:
        console.print(f"removed {container_id[:12]}: {reason}")
    console.print(f"{len(report.removed)} removed, {report.kept} kept (owners alive)")
