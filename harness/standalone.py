"""Sandboxes for an env used on its own (e.g. via `gymnasium.make`), without an `EnvPool`."""

from __future__ import annotations

from typing import Literal

from harness.backends import DockerBackend, LocalBackend, SandboxBackend
from harness.errors import SandboxError
from harness.handle import OwnedSandboxHandle
from harness.images import ensure_base_image
from harness.sandbox.docker import docker_client
from harness.sandbox.limits import ContainerLimits, ExecLimits

__all__ = ["BackendName", "make_backend", "standalone_handle"]

BackendName = Literal["auto", "docker", "local"]


def make_backend(
    name: BackendName,
    *,
    workdir: str = "/testbed",
    limits: ContainerLimits | None = None,
    exec_limits: ExecLimits | None = None,
) -> SandboxBackend:
    """The named backend; `auto` is Docker when an engine answers, else local (not isolated)."""
    if name == "local":
        return LocalBackend(workdir=workdir, exec_limits=exec_limits)
    try:
        client = docker_client()
    except SandboxError:
        if name == "docker":
            raise
        return LocalBackend(workdir=workdir, exec_limits=exec_limits)
    return DockerBackend(client, workdir=workdir, limits=limits, exec_limits=exec_limits)


def standalone_handle(
    backend: BackendName = "auto", image: str | None = None
) -> OwnedSandboxHandle:
    """A handle that starts one sandbox on first use; Docker images default to the base image."""
    chosen = make_backend(backend)

    async def create() -> object:
        target = image
        if target is None and isinstance(chosen, DockerBackend):
            target = ensure_base_image(chosen.client)
        return await chosen.create(target or "")

    return OwnedSandboxHandle(create)  # type: ignore[arg-type]
