"""`conductor envs ...`: housekeeping of env sandboxes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from pydantic import ValidationError

from foundation.config import load_config
from foundation.errors import ConductorError
from harness.errors import ConfigError, HarnessError
from harness.fleet.docker_hosts import reap_hosts
from harness.pool import PoolConfig
from harness.reaper import ReapReport, reap_containers
from harness.sandbox.docker import docker_client
from rollout.cli.console import console, fail

__all__ = ["app"]

app = typer.Typer(help="Manage env sandboxes (containers).", no_args_is_help=True)


@app.command("reap")
def reap(
    all_containers: bool = typer.Option(
        False, "--all", help="remove every project container, even those of live owners"
    ),
    pool: Path | None = typer.Option(
        None, "--pool", help="a pool config (YAML): reap every Docker host of its `hosts`"
    ),
    hosts: list[str] = typer.Option(
        [], "--host", help="a Docker host to reap: a DOCKER_HOST URL or a context (repeatable)"
    ),
) -> None:
    """Remove project containers whose owner process is gone or whose TTL has passed, on the
    local daemon, or on every host of `--pool` / `--host`."""
    try:
        config = _hosts_config(pool, hosts)
        if config is None or not config.hosts:
            _print_report("", reap_containers(docker_client(), remove_all=all_containers))
            return
        reports = asyncio.run(reap_hosts(config, remove_all=all_containers))
    except ConductorError as exc:
        fail(str(exc))
    unreachable = []
    for name, report in reports.items():
        if isinstance(report, HarnessError):
            console.print(f"[yellow]{name}: not reaped: {report}[/]")
            unreachable.append(name)
        else:
            _print_report(f"{name}: ", report)
    if unreachable:
        fail(f"{len(unreachable)} host(s) did not answer: {', '.join(unreachable)}; reap again")


def _hosts_config(pool: Path | None, hosts: list[str]) -> PoolConfig | None:
    """The hosts to reap: the pool config's, plus those named with --host."""
    config = load_config(PoolConfig, pool) if pool is not None else None
    if not hosts:
        return config
    named = [
        {"name": f"cli-{index}", "endpoint" if "://" in host else "context": host}
        for index, host in enumerate(hosts)
    ]
    base = (config or PoolConfig()).model_dump(mode="json")
    try:
        return PoolConfig.model_validate({**base, "hosts": [*base["hosts"], *named]})
    except ValidationError as exc:
        problems = "; ".join(error["msg"] for error in exc.errors())
        raise ConfigError(f"--host: {problems}") from exc


def _print_report(prefix: str, report: ReapReport) -> None:
    for container_id, reason in report.removed:
        console.print(f"{prefix}removed {container_id[:12]}: {reason}")
    console.print(f"{prefix}{len(report.removed)} removed, {report.kept} kept (owners alive)")
