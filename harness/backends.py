"""Sandbox backends: how the env pool creates a sandbox for an image (Docker, or local dirs).

The pool speaks only `SandboxBackend`; which one runs is configuration (`pool.backend`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Protocol, runtime_checkable

import docker
import docker.errors

from harness.errors import DockerUnavailableError, ImageNotFoundError, SandboxError
from harness.reaper import reap_containers
from harness.sandbox.base import Sandbox
from harness.sandbox.docker import (
    DockerSandbox,
    docker_call,
    new_container_name,
    remove_container_named,
)
from harness.sandbox.limits import ContainerLimits, ExecLimits
from harness.sandbox.local import LocalSandbox

log = logging.getLogger(__name__)

__all__ = ["DockerBackend", "LocalBackend", "SandboxBackend"]


@runtime_checkable
class SandboxBackend(Protocol):
    """Creates sandboxes from images and cleans up after crashed owners."""

    name: str

    async def create(self, image: str) -> Sandbox:
        """A new, started sandbox for `image`."""
        ...

    async def reap(self) -> int:
        """Remove sandboxes left behind by dead owners; returns how many were removed."""
        ...


class DockerBackend:
    """Containers on a Docker engine: the local one, or one host of several (`host`).

    Which daemon is the client's (`docker_client()` for the local one, `docker_client_at(url)`
    for a host); `host` names it in errors, so a missing image says on which host.
    """

    name = "docker"

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        workdir: str = "/testbed",
        limits: ContainerLimits | None = None,
        exec_limits: ExecLimits | None = None,
        host: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.client = client
        self.host = host
        self._endpoint = endpoint
        self._workdir = workdir
        self._limits = limits or ContainerLimits()
        self._exec_limits = exec_limits or ExecLimits()
        self._lost: set[str] = set()  # created while the daemon went away: never handed out

    async def create(self, image: str) -> Sandbox:
        """A new, started container for `image`.

        Cancelling the caller does not stop the daemon from making it, so a cancelled create
        waits for the container and removes it (a run that stops mid-start leaves none behind);
        if that wait is cut short too, the name is kept for `remove_lost`.
        """
        name = new_container_name()
        creating = asyncio.ensure_future(
            DockerSandbox.create(
                self.client,
                image,
                workdir=self._workdir,
                limits=self._limits,
                exec_limits=self._exec_limits,
                name=name,
            )
        )
        try:
            sandbox = await asyncio.shield(creating)
        except asyncio.CancelledError:
            self._lost.add(name)
            with contextlib.suppress(BaseException):
                await (await creating).aclose()
                self._lost.discard(name)
            raise
        except DockerUnavailableError as exc:
            self._lost.add(name)  # the daemon may have made it before it went away
            if self.host is None:
                raise
            raise self.unavailable(exc) from exc
        except SandboxError as exc:
            if not isinstance(exc, ImageNotFoundError):  # created, then refused (a daemon
                self._lost.add(name)  # shutting down): the pool's close makes sure it is gone
            # docker-py tries a pull for a missing image, so the daemon may answer with a
            # registry error instead of "not found": ask whether the image is there.
            if self.host is None or await self._has_image(image):
                raise
            raise ImageNotFoundError(
                f"image {image!r} is not on Docker host {self.where}; build it there or copy "
                f"it: `docker save {image} | docker -H {self.endpoint} load`"
            ) from exc
        if self._lost:
            await self.remove_lost()
        return sandbox

    @property
    def lost_names(self) -> frozenset[str]:
        """Names of containers that may exist but could not be removed yet."""
        return frozenset(self._lost)

    async def remove_lost(self) -> int:
        """Remove containers whose creation answer was lost in a daemon outage (best effort:
        the ones the daemon cannot be asked about yet are kept for the next call)."""
        removed = 0
        for name in sorted(self._lost):
            try:
                if not await remove_container_named(self.client, name):
                    continue  # the daemon is still busy with it
            except DockerUnavailableError:
                continue
            except SandboxError as exc:
                log.warning("keeping %s for a later removal: %s", name, exc)
                continue
            self._lost.discard(name)
            removed += 1
        return removed

    @property
    def endpoint(self) -> str:
        """The daemon's URL as the client reaches it (for messages and commands)."""
        return self._endpoint or str(self.client.api.base_url)

    @property
    def where(self) -> str:
        """`name (endpoint)` of the host, for messages."""
        return f"{self.host} ({self.endpoint})" if self.host else self.endpoint

    def unavailable(self, exc: DockerUnavailableError) -> DockerUnavailableError:
        """`exc` as said of this host, with the command that checks its daemon."""
        return DockerUnavailableError(
            f"Docker host {self.where}: {exc} (this host: `docker -H {self.endpoint} info`)"
        )

    async def _has_image(self, image: str) -> bool:
        try:
            await docker_call(self.client.images.get, image)
        except docker.errors.ImageNotFound:
            return False
        except (docker.errors.DockerException, DockerUnavailableError):
            return True  # unknown: keep the original error
        return True

    async def ping(self) -> None:
        """Check that the daemon answers.

        Raises:
            DockerUnavailableError: it does not; the message names the host.
        """
        try:
            await docker_call(self.client.ping)
        except DockerUnavailableError as exc:
            raise self.unavailable(exc) from exc
        except docker.errors.DockerException as exc:
            raise DockerUnavailableError(
                f"Docker host {self.where} refused a ping ({exc}); check `docker -H "
                f"{self.endpoint} info`"
            ) from exc

    async def reap(self) -> int:
        """Remove leftovers of dead owners on this daemon (see `harness.reaper`).

        Raises:
            DockerUnavailableError: the daemon does not answer.
        """
        report = await docker_call(reap_containers, self.client)
        return len(report.removed)


class LocalBackend:
    """Temporary directories on this machine. NOT ISOLATED (see `LocalSandbox`).

    An "image" is a template directory registered with `add_image`; each sandbox starts as a
    copy of it. The image name `""` (or any unregistered name when `allow_empty=True`) gives an
    empty directory.
    """

    name = "local"

    def __init__(
        self,
        *,
        workdir: str = "/testbed",
        exec_limits: ExecLimits | None = None,
        allow_empty: bool = True,
    ) -> None:
        self._workdir = workdir
        self._exec_limits = exec_limits or ExecLimits()
        self._templates: dict[str, Path] = {}
        self._allow_empty = allow_empty

    def add_image(self, image: str, template_dir: Path) -> None:
        """Make `image` mean "a copy of `template_dir`"."""
        if not template_dir.is_dir():
            raise ImageNotFoundError(
                f"template directory {template_dir} for {image!r} does not exist"
            )
        self._templates[image] = template_dir

    async def create(self, image: str) -> Sandbox:
        template = self._templates.get(image)
        if template is None and not self._allow_empty:
            known = ", ".join(sorted(self._templates)) or "none"
            raise ImageNotFoundError(f"no local template for image {image!r} (registered: {known})")
        root = Path(tempfile.mkdtemp(prefix="conductor-local-"))
        if template is not None:
            await asyncio.to_thread(
                shutil.copytree, template, root, symlinks=True, dirs_exist_ok=True
            )
        return _OwnedLocalSandbox(root, workdir=self._workdir, limits=self._exec_limits)

    async def reap(self) -> int:
        return 0  # temporary directories die with their sandbox


class _OwnedLocalSandbox(LocalSandbox):
    """A LocalSandbox that deletes its directory on close (the backend made it)."""

    async def aclose(self) -> None:
        await super().aclose()
        await asyncio.to_thread(shutil.rmtree, self.root, True)
