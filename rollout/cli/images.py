"""`conductor images ...`: build the offline base image (and task images, with --tasks)."""

from __future__ import annotations

from pathlib import Path

import typer

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
            from envs.swe.images import build_task_images_cli

            build_task_images_cli(client, tag, tasks, console)
    except HarnessError as exc:
        fail(str(exc))
