"""`conductor images ...`: build the offline base image (and task images, with --tasks)."""

from __future__ import annotations

from pathlib import Path

import docker
import typer
from rich.progress import Progress

from envs.swe.images import TaskImageConfig, TaskImageResolver, build_task_images
from envs.swe.tasks import load_tasks
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
            _build_task_images(client, tag, tasks)
    except HarnessError as exc:
        fail(str(exc))


def _build_task_images(client: docker.DockerClient, base_image: str, tasks_path: Path) -> None:
    loaded = load_tasks(tasks_path)
    for error in loaded.errors:
        console.print(f"[yellow]skipped:[/] {error}")
    if not loaded.tasks:
        fail(f"no valid task in {tasks_path}; see the messages above")
    resolver = TaskImageResolver(TaskImageConfig(), base_image)
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
