"""A Docker daemon that stops answering is a sandbox error, never a `requests` exception that
crashes the run (fault 1 of the reliability issue)."""

from __future__ import annotations

import asyncio

import docker
import docker.models.containers
import pytest
import requests

from harness.backends import DockerBackend
from harness.errors import DockerUnavailableError, SandboxDeadError, SandboxError
from harness.sandbox.docker import DockerSandbox
from harness.sandbox.limits import ExecLimits
from tests.conftest import project_containers

pytestmark = pytest.mark.docker

NOWHERE = "unix:///tmp/conductor-no-daemon-here.sock"


def unreachable_client() -> docker.DockerClient:
    return docker.DockerClient(base_url=NOWHERE, version="1.41", timeout=2)


async def test_creating_a_sandbox_without_a_daemon_is_a_sandbox_error(base_image: str) -> None:
    with pytest.raises(DockerUnavailableError, match=r"did not answer.*dockerd"):
        await DockerSandbox.create(unreachable_client(), base_image)


async def test_a_sandbox_whose_daemon_goes_away_dies_cleanly(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    live = await DockerSandbox.create(docker_client, base_image)
    try:
        gone = unreachable_client()
        container = gone.containers.prepare_model(live._container.attrs)
        orphan = DockerSandbox(gone, container, live.workdir, ExecLimits())
        with pytest.raises(SandboxDeadError):
            await orphan.exec("true", timeout_s=5)
        assert not await orphan.is_alive()
        with pytest.raises(SandboxError):
            await orphan.read_file("x")
        await orphan.aclose()  # no exception although the daemon cannot be reached
    finally:
        await live.aclose()


async def test_a_lost_container_the_daemon_cannot_remove_yet_is_kept_for_later(
    docker_client: docker.DockerClient, base_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a daemon restart, removing a container can answer 409 Conflict; that must
    keep the name for the next try, not escape from `create` and crash the pool."""
    backend = DockerBackend(docker_client)
    lost = await backend.create(base_image)
    name = docker_client.containers.get(lost.container_id).name
    backend._lost.add(name)
    real_remove = docker_client.api.remove_container

    def conflicted(container: str, **kwargs: object) -> None:
        raise docker.errors.APIError("409 Conflict", response=_status(409))

    monkeypatch.setattr(docker_client.api, "remove_container", conflicted)
    another = await backend.create(base_image)  # tries the lost one on the way: no exception
    assert name in backend._lost
    monkeypatch.setattr(docker_client.api, "remove_container", real_remove)
    assert await backend.remove_lost() == 1
    assert not backend._lost
    await another.aclose()
    await lost.aclose()


def _status(code: int) -> requests.Response:
    response = requests.Response()
    response.status_code = code
    return response


@pytest.mark.parametrize("after_s", [0.0, 0.02, 0.05, 0.1])
async def test_a_create_cancelled_while_the_daemon_makes_the_container_leaves_none(
    docker_client: docker.DockerClient, base_image: str, after_s: float
) -> None:
    backend = DockerBackend(docker_client, exec_limits=ExecLimits(kill_grace_s=1))
    creating = asyncio.ensure_future(backend.create(base_image))
    await asyncio.sleep(after_s)  # the daemon is at some stage of creating and starting it
    creating.cancel()
    try:
        sandbox = await creating
    except asyncio.CancelledError:
        pass
    else:  # it was done before the cancel came: it is the caller's to close
        await sandbox.aclose()
    await backend.remove_lost()  # what a pool's close does
    assert project_containers(docker_client) == []
