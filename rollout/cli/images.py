"""`conductor images ...`: build the offline base image (and task images, with --tasks)."""

from __future__ import annotations

from pathlib import Path

import docker
import typer
from rich.progress import Progress

from envs.swe.datasets import DatasetConfig, load_dataset_tasks
from envs.swe.images import TaskImageConfig, TaskImageResolver, build_task_images
from envs.swe.tasks import TaskSetError
from foundation.config import load_config
from foundation.errors import ConfigError
from harness.errors import HarnessError
from harness.images import BaseImageRecipe, base_image_tag, build_base_image, image_exists
from harness.sandbox.docker import docker_client
from rollout.cli.console import console, fail

__all__ = ["app"]

app = typer.Typer(help="Build images offline (no registry needed).", no_args_is_help=True)


@app.command("build")
def build(
    tasks: Path | None = typer.Option(
        None, "--tasks", help="SWE task file (JSONL/JSON/Parquet): also build one image per task"
    ),
    dataset_format: str = typer.Option(
        "conductor",
        "--format",
        help="column layout of --tasks: conductor (our records), swe-bench, swe-gym, "
        "swe-rebench or r2e-gym (docs/swe.md); rows naming a prebuilt image are checked, not built",
    ),
    dataset_config: Path | None = typer.Option(
        None,
        "--dataset-config",
        help="YAML of the dataset conventions (image_template, test_cmd, repos: ...) for --tasks",
    ),
    allow_network: bool = typer.Option(
        False, "--allow-network", help="let install_cmd use the network while task images build"
    ),
    agent_uid: int | None = typer.Option(
        None,
        "--agent-uid",
        min=1,
        help="hand /testbed to this uid in the task images, for agents that run as "
        "pool.container.user (`conductor run` builds its own: with the default user `auto`, "
        "for pool.container.auto_uid, 1000)",
    ),
    force: bool = typer.Option(False, "--force", help="rebuild the base image even if it exists"),
) -> None:
    """Build the base image with debootstrap + docker import (about 40 s), if missing."""
    try:
        client = docker_client()
        recipe = BaseImageRecipe()
        tag = base_image_tag(recipe)
        if image_exists(client, tag) and not force:
            console.print(f"base image [bold]{tag}[/] is up to date")
        else:
            with console.status("building the base image") as status:
                build_base_image(client, recipe, progress=lambda line: status.update(line))
            console.print(f"built base image [bold]{tag}[/]")
        if tasks is not None:
            overrides = [f"format={dataset_format}"]
            dataset = load_config(DatasetConfig, dataset_config, overrides)
            image_config = TaskImageConfig(allow_network=allow_network, agent_uid=agent_uid)
            _build_task_images(client, tag, tasks, dataset, image_config)
    except (HarnessError, ConfigError, TaskSetError) as exc:
        fail(str(exc))


def _build_task_images(
    client: docker.DockerClient,
    base_image: str,
    tasks_path: Path,
    dataset: DatasetConfig,
    image_config: TaskImageConfig,
) -> None:
    loaded = load_dataset_tasks(tasks_path, dataset)
    for error in loaded.errors:
        console.print(f"[yellow]skipped:[/] {error}")
    if not loaded.tasks:
        fail(f"no valid task in {tasks_path}; see the messages above")
    resolver = TaskImageResolver(image_config, base_image)
    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task("task images", total=len(loaded.tasks))
        report = build_task_images(
            client, loaded.tasks, resolver, progress=lambda line: progress.advance(bar)
        )
    for instance_id, message in report.failed:
        console.print(f"[red]failed:[/] {instance_id}: {message}")
    console.print(
        f"task images: {len(report.built)} built, {len(report.cached)} up to date, "
        f"{len(report.failed)} failed in {report.seconds:.1f} s"
    )
    if report.failed:
        raise typer.Exit(1)
