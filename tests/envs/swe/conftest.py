"""Fixtures of the SWE env tests: the tiny hand-made task and local sandboxes holding it, and
task images on the real Docker engine (`runtime`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from envs.swe.images import TaskImageConfig, TaskImageResolver
from envs.swe.runtime import BackendSandboxes
from envs.swe.tasks import SWETask
from harness.backends import DockerBackend
from harness.sandbox import ContainerLimits, ExecLimits
from tests.envs.swe.tiny_task import TinyTaskBed, build_tiny_task


@pytest.fixture(scope="session")
def tiny_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SWETask, str]:
    """The buggy repo (built once), its task and its gold patch."""
    repo = tmp_path_factory.mktemp("tiny-template")
    task, gold_patch = build_tiny_task(repo)
    return repo, task, gold_patch


@pytest.fixture
def tiny_task(tiny_template: tuple[Path, SWETask, str]) -> SWETask:
    return tiny_template[1]


@pytest.fixture
def gold_patch(tiny_template: tuple[Path, SWETask, str]) -> str:
    return tiny_template[2]


@pytest.fixture
def bed(tiny_template: tuple[Path, SWETask, str], tmp_path: Path) -> TinyTaskBed:
    return TinyTaskBed(template=tiny_template[0], scratch=tmp_path)


@pytest.fixture(scope="module")
def runtime(docker_client: docker.DockerClient, base_image: str) -> Iterator[BackendSandboxes]:
    """Task images and sandboxes on the Docker engine, with small limits and fast kills."""
    backend = DockerBackend(
        docker_client,
        limits=ContainerLimits(memory_mb=512),
        exec_limits=ExecLimits(kill_grace_s=1, host_grace_s=5),
    )
    yield BackendSandboxes(backend, TaskImageResolver(TaskImageConfig(), base_image))
