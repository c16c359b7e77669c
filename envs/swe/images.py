"""Task images: one image per SWE task, built offline `FROM` the project's base image.

The image holds the repository at `base_commit` as a single squashed commit with no history
(agents otherwise mine the gold fix out of `git log`), its install step, and workdir
`/testbed`. Tags are content hashes of everything that goes in, so rebuilding an unchanged task
costs one `docker image inspect`. `TaskImageResolver` maps a task to its image name: our local
builds by default, or SWE-bench's published per-instance names for users with a registry.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import docker
import docker.errors
from pydantic import Field

from envs.swe.repo_source import materialize_task_repo
from envs.swe.tasks import SWETask
from foundation.config import FrozenConfig
from harness.errors import SandboxError
from harness.images import image_exists
from harness.sandbox.limits import AGENT_USER_LABEL, AUTO_USER

__all__ = [
    "BuildReport",
    "TaskImageConfig",
    "TaskImageResolver",
    "build_task_image",
    "build_task_images",
    "materialize_local_templates",
]

Progress = Callable[[str], None]


class TaskImageConfig(FrozenConfig):
    """Where task images come from (`conductor images build` and `bench swe` use the defaults)."""

    source: Literal["local", "swebench"] = Field(
        "local",
        description="local: built here by `conductor images build --tasks`; "
        "swebench: SWE-bench's published per-instance images (needs a registry)",
    )
    local_repository: str = Field("aio-conductor/swe", description="prefix of local task images")
    swebench_namespace: str = Field(
        "swebench", description="registry namespace of SWE-bench images"
    )
    swebench_arch: str = Field("x86_64", description="architecture part of SWE-bench image names")
    swebench_tag: str = Field("latest", description="tag of SWE-bench images")
    agent_uid: int | None = Field(
        None,
        ge=1,
        description="hand /testbed to this uid:gid after `install_cmd` (as root), so that agents "
        "can run as a non-root user (`pool.container.user` = the same `uid:gid`); None: root "
        "owns it, for agents that run as root (the image tag records the choice)",
    )
    allow_network: bool = Field(
        False,
        description="give `install_cmd` the network while a task image builds (off: builds are "
        "offline, as on machines without a registry; the image tag records the choice)",
    )


def numeric_uid(user: str | None, auto_uid: int | None = None) -> int | None:
    """The uid of a `uid[:gid]` container user (`pool.container.user`), for `agent_uid`;
    `auto_uid` for `auto` (the images then name it, and commands run as it); None for root,
    a user name (the image must then prepare its workdir) or no user."""
    if user == AUTO_USER:
        return auto_uid
    uid = (user or "").split(":")[0]
    return int(uid) if uid.isdigit() and int(uid) > 0 else None


class TaskImageResolver:
    """Task -> image name. Local names embed a hash of the image's inputs."""

    def __init__(self, config: TaskImageConfig, base_image: str) -> None:
        self.config = config
        self.base_image = base_image

    def image_for(self, task: SWETask) -> str:
        if task.image is not None:
            return task.image
        if self.config.source == "swebench":
            # Docker Hub forbids "__" in names; SWE-bench writes it as "_1776_" (swe-envs.md §1.2).
            name = task.instance_id.replace("__", "_1776_").lower()
            config = self.config
            repository = f"{config.swebench_namespace}/sweb.eval.{config.swebench_arch}.{name}"
            return f"{repository}:{config.swebench_tag}"
        slug = task.instance_id.lower().replace("__", "-")
        return f"{self.config.local_repository}-{slug}:{self._input_hash(task)}"

    def dockerfile(self, task: SWETask) -> str:
        lines = [f"FROM {self.base_image}", "COPY repo /testbed", "WORKDIR /testbed"]
        if task.install_cmd.strip():
            lines.append(f"RUN {task.install_cmd}")
        if self.config.agent_uid is not None:
            uid = self.config.agent_uid
            lines.append(f"RUN chown -R {uid}:{uid} /testbed")
            # Names the user for `pool.container.user: auto` (commands run as it).
            lines.append(f'LABEL {AGENT_USER_LABEL}="{uid}:{uid}"')
        return "\n".join(lines) + "\n"

    def _input_hash(self, task: SWETask) -> str:
        network = "network" if self.config.allow_network else "offline"
        inputs = "\0".join(
            (self.dockerfile(task), task.base_commit, task.project_tree or "", task.repo, network)
        )
        return hashlib.sha256(inputs.encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What `build_task_images` did: images built and reused, and the time it took."""

    built: tuple[str, ...]
    cached: tuple[str, ...]
    failed: tuple[tuple[str, str], ...]
    seconds: float


def build_task_image(
    client: docker.DockerClient, task: SWETask, resolver: TaskImageResolver
) -> bool:
    """Build the task's image unless it exists; True if it was built now."""
    tag = resolver.image_for(task)
    if image_exists(client, tag):
        return False
    if task.image is not None:
        raise SandboxError(
            f"task {task.instance_id} names the prebuilt image {tag}, which is not here; pull or "
            f"build it first (`docker pull {tag}`): the conductor never pulls images"
        )
    if resolver.config.source != "local":
        raise SandboxError(
            f"{tag} is not here and source={resolver.config.source!r} images are pulled, not built"
        )
    if not image_exists(client, resolver.base_image):
        raise SandboxError(
            f"base image {resolver.base_image} is missing; run `conductor images build`"
        )
    with tempfile.TemporaryDirectory(prefix="conductor-task-image-") as context:
        materialize_task_repo(task, Path(context) / "repo")
        (Path(context) / "Dockerfile").write_text(resolver.dockerfile(task))
        try:
            client.images.build(
                path=context,
                tag=tag,
                rm=True,
                forcerm=True,
                network_mode="default" if resolver.config.allow_network else "none",
                pull=False,
            )
        except docker.errors.BuildError as exc:
            log = "".join(str(chunk.get("stream", "")) for chunk in exc.build_log)
            _remove_dangling_layers(client, log)
            raise SandboxError(f"building {tag} failed: {exc.msg}\n{log[-1500:]}") from exc
    return True


def _remove_dangling_layers(client: docker.DockerClient, build_log: str) -> None:
    """Remove the untagged images a failed build left (its `---> <id>` steps), best effort."""
    for layer_id in reversed(re.findall(r"---> ([0-9a-f]{12})\b", build_log)):
        with contextlib.suppress(docker.errors.DockerException):
            if not client.images.get(layer_id).tags:
                client.images.remove(layer_id, noprune=False)


def build_task_images(
    client: docker.DockerClient,
    tasks: Sequence[SWETask],
    resolver: TaskImageResolver,
    progress: Progress = lambda line: None,
) -> BuildReport:
    """Build every missing task image; one failure does not stop the others."""
    started = time.monotonic()
    built: list[str] = []
    cached: list[str] = []
    failed: list[tuple[str, str]] = []
    for index, task in enumerate(tasks, start=1):
        progress(f"[{index}/{len(tasks)}] {task.instance_id}")
        try:
            (built if build_task_image(client, task, resolver) else cached).append(task.instance_id)
        except (SandboxError, docker.errors.DockerException, OSError, ValueError) as exc:
            failed.append((task.instance_id, str(exc)))
    return BuildReport(tuple(built), tuple(cached), tuple(failed), time.monotonic() - started)


def materialize_local_templates(
    tasks: Iterable[SWETask], resolver: TaskImageResolver, root_dir: Path
) -> dict[str, Path]:
    """For the local (not isolated) backend: one template directory per task image."""
    templates: dict[str, Path] = {}
    for task in tasks:
        destination = root_dir / task.instance_id
        if not destination.exists():
            materialize_task_repo(task, destination)
        templates[resolver.image_for(task)] = destination
    return templates
