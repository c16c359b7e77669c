"""Where SWE episodes get their sandboxes: task images on a backend, for agents and graders.

`BackendSandboxes` lends a fresh sandbox from the task's image (building a missing local
image first) and is what `gymnasium.make("conductor/SWE-v0")` uses; under the rollout layer the
env pool hands out warm sandboxes instead and only the grading factory comes from here.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path

from envs.swe.grading import GradableTask
from envs.swe.images import (
    TaskImageConfig,
    TaskImageResolver,
    build_task_image,
    materialize_local_templates,
)
from envs.swe.sandbox_source import ReleaseSandbox
from envs.swe.tasks import SWETask
from harness.backends import DockerBackend, LocalBackend, SandboxBackend
from harness.images import ensure_base_image
from harness.reaper import pid_alive
from harness.sandbox.base import Sandbox
from harness.sandbox.limits import ContainerLimits, ExecLimits
from harness.standalone import BackendName, make_backend

__all__ = ["BackendSandboxes", "remove_stale_templates", "swe_backend"]


_TEMPLATES_PREFIX = "conductor-swe-templates-"


def remove_stale_templates(parent: Path | None = None) -> int:
    """Remove template directories whose process is gone (a run killed with `kill -9` cannot
    remove its own); returns how many were removed."""
    removed = 0
    for path in Path(parent or tempfile.gettempdir()).glob(f"{_TEMPLATES_PREFIX}*-*"):
        owner = path.name[len(_TEMPLATES_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not pid_alive(int(owner)):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


class BackendSandboxes:
    """Lends sandboxes from task images on `backend`; also the grading-sandbox factory."""

    def __init__(self, backend: SandboxBackend, resolver: TaskImageResolver) -> None:
        self.backend = backend
        self.resolver = resolver
        self._ready_images: set[str] = set()
        self._template_root: Path | None = None
        self._cleanup: Callable[[], object] | None = None

    def close(self) -> None:
        """Remove the local backend's template directories (a no-op for Docker)."""
        if self._cleanup is not None:
            self._cleanup()
        self._template_root = None
        self._ready_images.clear()

    async def ensure_image(self, task: SWETask) -> str:
        """The task's image name, built (Docker) or materialized (local) if missing."""
        image = self.resolver.image_for(task)
        if image in self._ready_images:
            return image
        if isinstance(self.backend, DockerBackend):
            await asyncio.to_thread(build_task_image, self.backend.client, task, self.resolver)
        elif isinstance(self.backend, LocalBackend):
            if self._template_root is None:
                await asyncio.to_thread(remove_stale_templates)
                prefix = f"{_TEMPLATES_PREFIX}{os.getpid()}-"
                self._template_root = Path(tempfile.mkdtemp(prefix=prefix))
                # Removed by close(), or when this object goes, or at exit: never left behind.
                self._cleanup = weakref.finalize(
                    self, shutil.rmtree, self._template_root, ignore_errors=True
                )
            templates = await asyncio.to_thread(
                materialize_local_templates, [task], self.resolver, self._template_root
            )
            self.backend.add_image(image, templates[image])
        self._ready_images.add(image)
        return image

    async def acquire(self, task: SWETask) -> tuple[Sandbox, ReleaseSandbox]:
        sandbox = await self.backend.create(await self.ensure_image(task))
        return sandbox, sandbox.aclose

    async def grading_sandbox(self, task: GradableTask) -> Sandbox:
        """A fresh sandbox from the clean task image (the grader closes it)."""
        if not isinstance(task, SWETask):
            raise TypeError(
                f"task images are built from SWETask records, got {type(task).__name__}"
            )
        return await self.backend.create(await self.ensure_image(task))


def swe_backend(
    name: BackendName = "auto",
    config: TaskImageConfig | None = None,
    *,
    workdir: str = "/testbed",
    limits: ContainerLimits | None = None,
    exec_limits: ExecLimits | None = None,
) -> BackendSandboxes:
    """Sandboxes for SWE tasks on the named backend (auto: Docker if an engine answers), with
    the container and command limits of the pool config (`pool.container`, `pool.exec`)."""
    backend = make_backend(name, workdir=workdir, limits=limits, exec_limits=exec_limits)
    base_image = ""
    if isinstance(backend, DockerBackend):
        base_image = ensure_base_image(backend.client, progress=lambda line: None)
    return BackendSandboxes(backend, TaskImageResolver(config or TaskImageConfig(), base_image))
