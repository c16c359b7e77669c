"""The one place that chooses a run's lease pool: one `EnvPool`, a fleet over `pool.hosts`, or
Ray env workers on every node of a cluster."""

from __future__ import annotations

from collections.abc import Sequence

from foundation.clock import Clock
from harness.backends import DockerBackend, SandboxBackend
from harness.events import EventBus
from harness.fleet.docker_hosts import docker_host_pools
from harness.fleet.protocol import LeasePool
from harness.fleet.ray_config import RayPoolConfig
from harness.pool import EnvPool, PoolConfig

__all__ = ["build_pool"]


def build_pool(
    config: PoolConfig,
    backend: SandboxBackend,
    *,
    bus: EventBus,
    clock: Clock,
    images: Sequence[str] = (),
    ray: RayPoolConfig | None = None,
) -> LeasePool:
    """The run's lease pool (enter it to start it).

    Without `config.hosts`: one `EnvPool` on `backend`, as always. With them: a `PoolFleet`
    with one pool per host; `backend` is then where the run built its images, and a host that
    lacks one of `images` gets a copy from there (a non-Docker `backend` has none to give).
    With `ray`: one env worker per Ray node, each on its node's own Docker engine (the env
    factories must then pickle, e.g. `envs.swe.factory.SWEEnvFactory`).

    Raises:
        ConfigError: a host names an unknown Docker context, or two hosts are one daemon; or
            both `ray` and `config.hosts` are set.
    """
    if ray is not None:
        from harness.fleet.ray_workers import ray_fleet  # its modules import Ray only lazily

        return ray_fleet(config, ray, bus=bus, clock=clock)
    if not config.hosts:
        return EnvPool(backend, config, clock=clock, bus=bus)
    source = backend.client if isinstance(backend, DockerBackend) else None
    return docker_host_pools(config, bus=bus, clock=clock, images=images, image_source=source)
