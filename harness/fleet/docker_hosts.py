"""Several Docker hosts without Ray: one `EnvPool` per daemon of `pool.hosts`, as a `PoolFleet`.

Each host gets its own `DockerBackend` (a client for its `DOCKER_HOST` URL or Docker context),
its own limits (the pool's, with the host's overrides) and its own reaper pass, and shares the
run's event bus and clock. A host is checked when the fleet starts (`DockerHostPool`): its
daemon must answer and hold the run's images. A missing image is copied from the image source
(the daemon the run built its images on) with `docker save | docker load`; without a source, or
when the copy fails, the host cannot start and the error says which image to put there and how.
A host that cannot start, or whose daemon goes away later, is a member down (`PoolFleet`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import docker
import docker.context
import docker.errors
import docker.tls

from foundation.clock import Clock
from harness.backends import DockerBackend
from harness.errors import ConfigError, DockerUnavailableError, ImageNotFoundError
from harness.events import EventBus
from harness.fleet.pool_fleet import FleetMember, PoolFleet
from harness.images import image_exists
from harness.pool import DockerHostConfig, EnvPool, PoolConfig
from harness.reaper import ReapReport, reap_containers
from harness.sandbox.docker import docker_call, docker_client_at

__all__ = [
    "ContextEndpoint",
    "DockerHostPool",
    "HostEndpoint",
    "copy_image",
    "docker_host_pools",
    "host_backends",
    "read_docker_contexts",
    "reap_hosts",
    "resolve_endpoints",
]

log = logging.getLogger(__name__)

HOST_API_VERSION = "1.41"
"""The Docker API version spoken to every host (Docker 20.10 and later): pinned, so that making a
host's client needs no answer from it (a host that is down at start is a member down)."""


@dataclass(frozen=True, slots=True)
class ContextEndpoint:
    """What a Docker context says of its daemon: the URL and, for tcp, the TLS settings."""

    url: str
    tls: docker.tls.TLSConfig | None = None


@dataclass(frozen=True, slots=True)
class HostEndpoint:
    """One host of `pool.hosts`, resolved: its name, URL and TLS settings."""

    name: str
    url: str
    tls: docker.tls.TLSConfig | None = None


def resolve_endpoints(
    hosts: Sequence[DockerHostConfig], contexts: Mapping[str, ContextEndpoint]
) -> list[HostEndpoint]:
    """Each host's endpoint: its URL, or its context's (pure: `contexts` was read beforehand).

    Raises:
        ConfigError: a host names an unknown context, or two hosts reach the same daemon.
    """
    resolved: list[HostEndpoint] = []
    for host in hosts:
        if host.endpoint is not None:
            resolved.append(HostEndpoint(host.name, host.endpoint))
            continue
        assert host.context is not None  # DockerHostConfig has exactly one of the two
        found = contexts.get(host.context)
        if found is None:
            known = ", ".join(sorted(contexts)) or "none"
            raise ConfigError(
                f"pool.hosts: host {host.name!r} names the Docker context {host.context!r}, "
                f"which does not exist (known: {known}); create it with `docker context create "
                f"{host.context} --docker host=tcp://HOST:2376` or give an endpoint URL"
            )
        resolved.append(HostEndpoint(host.name, found.url, found.tls))
    by_url: dict[str, str] = {}
    for endpoint in resolved:
        other = by_url.setdefault(endpoint.url, endpoint.name)
        if other != endpoint.name:
            raise ConfigError(
                f"pool.hosts: hosts {other!r} and {endpoint.name!r} are the same daemon "
                f"({endpoint.url}); list each daemon once and give it the limits of both"
            )
    return resolved


def read_docker_contexts(names: Iterable[str]) -> dict[str, ContextEndpoint]:
    """The named Docker contexts that exist (from the Docker CLI's context store)."""
    found: dict[str, ContextEndpoint] = {}
    for name in set(names):
        try:
            context = docker.context.ContextAPI.get_context(name)
        except docker.errors.DockerException as exc:
            raise ConfigError(f"cannot read the Docker context {name!r}: {exc}") from exc
        if context is not None and context.Host:
            found[name] = ContextEndpoint(str(context.Host), context.TLSConfig or None)
    return found


def host_backends(
    config: PoolConfig,
    *,
    contexts: Mapping[str, ContextEndpoint] | None = None,
    timeout_s: float = 120.0,
) -> list[tuple[DockerHostConfig, DockerBackend]]:
    """A `DockerBackend` per host of `config.hosts` (no I/O but reading the context store).

    Raises:
        ConfigError: see `resolve_endpoints`.
    """
    named = [host.context for host in config.hosts if host.context is not None]
    if contexts is None:
        contexts = read_docker_contexts(named)
    backends: list[tuple[DockerHostConfig, DockerBackend]] = []
    for host, endpoint in zip(config.hosts, resolve_endpoints(config.hosts, contexts), strict=True):
        client = docker_client_at(
            endpoint.url, api_version=HOST_API_VERSION, tls=endpoint.tls, timeout_s=timeout_s
        )
        backend = DockerBackend(
            client,
            workdir=config.workdir,
            limits=config.container,
            exec_limits=config.exec,
            host=host.name,
            endpoint=endpoint.url,
        )
        backends.append((host, backend))
    return backends


def copy_image(source: docker.DockerClient, target: docker.DockerClient, image: str) -> None:
    """Stream `image` (with its tag) from one daemon to another: `docker save | docker load`.

    Blocking; run it in a thread. Raises `docker.errors.DockerException` or a transport error.
    """
    exported = source.images.get(image).save(named=image)
    target.images.load(exported)  # a stream: the image is not held in memory whole


class DockerHostPool(EnvPool):
    """One host's env pool; on entering, its daemon must answer and hold `images`.

    Images missing there are copied from `image_source` (the daemon the run built them on).
    Entering raises a `HarnessError` that names the host when it cannot take samples, so the
    fleet marks it down: `DockerUnavailableError` (its daemon does not answer) or
    `ImageNotFoundError` (an image is missing and cannot be copied; the message gives the
    command that puts it there).
    """

    def __init__(
        self,
        backend: DockerBackend,
        config: PoolConfig,
        *,
        clock: Clock,
        bus: EventBus,
        images: Sequence[str] = (),
        image_source: docker.DockerClient | None = None,
        host: str = "",
    ) -> None:
        super().__init__(backend, config, clock=clock, bus=bus, host=host)
        self.docker = backend
        self._images = tuple(dict.fromkeys(images))
        self._image_source = image_source

    async def __aenter__(self) -> DockerHostPool:
        await self.docker.ping()
        await self.ensure_images(self._images)
        await super().__aenter__()
        return self

    async def ensure_images(self, images: Iterable[str]) -> list[str]:
        """Copy the `images` this host lacks from the image source; returns those copied.

        Raises:
            ImageNotFoundError: one is missing and cannot be copied (says what to run).
            DockerUnavailableError: the host's daemon does not answer.
        """
        copied: list[str] = []
        for image in images:
            if await self._has_here(image):
                continue
            source = self._image_source
            if source is None:
                raise ImageNotFoundError(
                    f"{self._missing(image)} and the run has no daemon to copy it from; put it "
                    f"there: {self._copy_command(image)}"
                )
            if not await docker_call(image_exists, source, image):
                raise ImageNotFoundError(
                    f"{self._missing(image)}, nor on the daemon the run builds images on; "
                    "build it with `conductor images build`"
                )
            log.info("copying image %s to Docker host %s", image, self.docker.where)
            try:
                await docker_call(copy_image, source, self.docker.client, image)
            except docker.errors.DockerException as exc:
                raise ImageNotFoundError(
                    f"{self._missing(image)}; copying it there failed ({exc}). Copy it by hand: "
                    f"{self._copy_command(image)}"
                ) from exc
            if not await self._has_here(image):
                raise ImageNotFoundError(
                    f"{self._missing(image)}: it was loaded but is not listed there; see that "
                    f"daemon's log, or copy it by hand: {self._copy_command(image)}"
                )
            copied.append(image)
        return copied

    async def _has_here(self, image: str) -> bool:
        """Whether this host has `image` (a daemon that does not answer names the host)."""
        try:
            return await docker_call(image_exists, self.docker.client, image)
        except DockerUnavailableError as exc:
            raise self.docker.unavailable(exc) from exc

    def _missing(self, image: str) -> str:
        return f"image {image!r} is not on Docker host {self.docker.where}"

    def _copy_command(self, image: str) -> str:
        return f"`docker save {image} | docker -H {self.docker.endpoint} load`"


def docker_host_pools(
    config: PoolConfig,
    *,
    bus: EventBus,
    clock: Clock,
    images: Sequence[str] = (),
    image_source: docker.DockerClient | None = None,
    contexts: Mapping[str, ContextEndpoint] | None = None,
) -> PoolFleet:
    """A `PoolFleet` with one `DockerHostPool` per host of `config.hosts`.

    Each host's pool has the pool's settings with the host's overrides (`PoolConfig.for_host`);
    all share `bus` and `clock`. `images` must be on every host that starts (see
    `DockerHostPool`). Enter the fleet to start it.

    Raises:
        ConfigError: `config.hosts` is empty, or names an unknown context or one daemon twice.
    """
    if not config.hosts:
        raise ConfigError("docker_host_pools needs pool.hosts; without them use one EnvPool")
    members = [
        FleetMember(
            host.name,
            DockerHostPool(
                backend,
                config.for_host(host),
                clock=clock,
                bus=bus,
                images=images,
                image_source=image_source,
                host=host.name,
            ),
        )
        for host, backend in host_backends(config, contexts=contexts)
    ]
    return PoolFleet(members)


async def reap_hosts(
    config: PoolConfig, *, remove_all: bool = False
) -> dict[str, ReapReport | DockerUnavailableError]:
    """Run the reaper on every host of `config.hosts`: each host's report, or the error of a
    host whose daemon does not answer (the others are still reaped).

    Raises:
        ConfigError: see `resolve_endpoints`.
    """
    reports: dict[str, ReapReport | DockerUnavailableError] = {}
    for host, backend in host_backends(config):
        try:
            reports[host.name] = await docker_call(
                reap_containers, backend.client, remove_all=remove_all
            )
        except DockerUnavailableError as exc:
            reports[host.name] = backend.unavailable(exc)
    return reports
