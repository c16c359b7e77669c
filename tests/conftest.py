"""Shared fixtures: a real Docker engine (required in CI), the base image, leak checks; under
pytest-xdist, one worker for every test that shares the Docker engine or starts a Ray cluster."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import pytest

from harness.images import ensure_base_image
from harness.sandbox.docker import docker_client as make_docker_client
from harness.sandbox.labels import MANAGED_LABEL, parse_owner

REQUIRE_DOCKER = os.environ.get("CONDUCTOR_REQUIRE_DOCKER") == "1"


def _client_or_none() -> docker.DockerClient | None:
    try:
        return make_docker_client()
    except Exception:
        return None


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A client for the local engine. Missing engine: skip locally, fail in CI."""
    client = _client_or_none()
    if client is None:
        if REQUIRE_DOCKER:
            pytest.fail("CONDUCTOR_REQUIRE_DOCKER=1 but no Docker engine answers")
        pytest.skip("no Docker engine; start dockerd to run Docker tests")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    """The project's offline base image (built once, about 45 s, then cached by recipe hash)."""
    return ensure_base_image(docker_client, progress=lambda message: None)


# The tests that share this machine's Docker engine (its images, built once on a fresh machine)
# or start a Ray cluster (its ports, its session directory) run one at a time on one xdist
# worker (`--dist loadgroup`); everything else spreads over the others.
SHARED_DAEMON_GROUP = "docker-and-ray"
_DOCKER_FIXTURES = frozenset({"docker_client", "base_image"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        uses_docker = bool(_DOCKER_FIXTURES & set(getattr(item, "fixturenames", ())))
        if uses_docker or item.get_closest_marker("docker") or item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.xdist_group(SHARED_DAEMON_GROUP))


def project_containers(client: docker.DockerClient) -> list[str]:
    """Ids of the project containers this test process created."""
    mine = []
    # The list call's own records (labels included): no per-container inspect, which would
    # race with containers other processes remove meanwhile.
    for record in client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"}):
        owner = parse_owner(record.get("Labels") or {})
        if owner is not None and owner.pid == os.getpid() and owner.host == socket.gethostname():
            mine.append(str(record["Id"]))
    return mine


# Containers left behind by xdist workers, counted in the controller (a worker's exit status
# does not reach the controller's).
_LEFT_BY_WORKERS = pytest.StashKey[int]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """An xdist worker is done: carry its leftover count to the controller."""
    left = getattr(node, "workeroutput", {}).get("leftover_containers", 0)
    node.config.stash[_LEFT_BY_WORKERS] = node.config.stash.get(_LEFT_BY_WORKERS, 0) + left


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After the suite no container a test process made may remain (each worker checks its own)."""
    leftovers = _remove_own_leftovers()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller fails the run
        workeroutput["leftover_containers"] = leftovers
    leftovers += session.config.stash.get(_LEFT_BY_WORKERS, 0)
    if leftovers:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nFAIL: {leftovers} project container(s) were left behind by the tests")


def _remove_own_leftovers() -> int:
    """Remove the project containers this process left; how many there were."""
    client = _client_or_none()
    if client is None:
        return 0
    leftovers = project_containers(client)
    for container_id in leftovers:
        with contextlib.suppress(docker.errors.NotFound):
            client.containers.get(container_id).remove(force=True)
    return len(leftovers)
