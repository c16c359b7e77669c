"""Shared fixtures: a real Docker engine (required in CI), the base image, leak checks."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After the suite no container this test process made may remain."""
    client = _client_or_none()
    if client is None:
        return
    leftovers = project_containers(client)
    if leftovers:
        for container_id in leftovers:
            with contextlib.suppress(docker.errors.NotFound):
                client.containers.get(container_id).remove(force=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nFAIL: {len(leftovers)} project container(s) were left behind by the tests")
