"""Sandboxes for an env used on its own (e.g. via `gymnasium.make`), without an `EnvPool`."""

from __future__ import annotations

import os
from typing import Literal

from harness.backends import DockerBackend, LocalBackend, SandboxBackend
from harness.errors import SandboxError
from harness.handle import OwnedSandboxHandle
from harness.images import ensure_base_image
from harness.sandbox.docker import docker_client
from harness.sandbox.limits import ContainerLimits, ExecLimits

__all__ = ["ALLOW_HOST_SANDBOX_ENV", "BackendName", "make_backend", "standalone_handle"]

ALLOW_HOST_SANDBOX_ENV = "CONDUCTOR_ALLOW_HOST_SANDBOX"
"""Set to 1 to let backend `auto` fall back to the unisolated host sandbox without Docker."""

BackendName = Literal["auto", "docker", "local"]


def make_backend(
    name: BackendName,
    *,
    workdir: str = "/testbed",
    limits: ContainerLimits | None = None,
    exec_limits: ExecLimits | None = None,
) -> SandboxBackend:
    """The named backend; `auto` is Docker when an engine answers.

    `auto` never falls back to the host on its own: the local backend runs the agent's commands
    on this machine, as this user, unisolated. Without Docker it raises, unless
    `CONDUCTOR_ALLOW_HOST_SANDBOX=1` opts in (the caller then says so loudly).

    Raises:
        SandboxError: no Docker engine answers (and no opt-in for `auto`); says what to do.
    """
    if name == "local":
        return LocalBackend(workdir=workdir, exec_limits=exec_limits)
    try:
        client = docker_client()
    except SandboxError as exc:
        if name == "docker":
            raise
        if os.environ.get(ALLOW_HOST_SANDBOX_ENV) == "1":
            return LocalBackend(workdir=workdir, exec_limits=exec_limits)
        raise SandboxError(
            f"{exc}. Start dockerd, or choose the host sandbox on purpose: backend `local` "
            "(e.g. pool.overrides=[backend=local]) runs the agent's commands on this machine, "
            f"NOT isolated; {ALLOW_HOST_SANDBOX_ENV}=1 lets `auto` fall back to it"
        ) from exc
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
