"""Shipped envs register with Gymnasium and pass its env checker on real sandboxes."""

from __future__ import annotations

import docker
import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from harness.errors import EnvNotFoundError
from harness.registration import make_env, register_envs
from tests.conftest import project_containers

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


def test_register_envs_is_idempotent_and_lists_shipped_ids() -> None:
    assert register_envs() == register_envs()
    assert {"conductor/Example-v0", "conductor/SWE-v0"} <= set(gymnasium.registry)


def test_misspelled_env_id_suggests_the_closest() -> None:
    with pytest.raises(EnvNotFoundError, match="Did you mean 'conductor/Example-v0'"):
        make_env("conductor/Exampel-v0")


@pytest.mark.parametrize("env_id", ["conductor/Example-v0", "conductor/SWE-v0"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_shipped_env_passes_check_env(
    env_id: str, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "docker":
        request.getfixturevalue("base_image")
    env = make_env(env_id, backend=backend)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()
        env.close()  # close is idempotent


@pytest.mark.docker
def test_example_env_solved_through_gymnasium_make(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    env = make_env("conductor/Example-v0", backend="docker")
    _, info = env.reset(seed=5)
    env.step(f"printf {info['word'][::-1]} > answer.txt")
    _, reward, terminated, _, _ = env.step("submit")
    env.close()
    assert terminated and reward == 1.0
    assert project_containers(docker_client) == []


def test_step_after_episode_end_asks_for_reset() -> None:
    env = make_env("conductor/Example-v0", backend="local")
    env.reset(seed=0)
    env.step("submit")
    with pytest.raises(Exception, match="reset"):
        env.step("ls")
    env.close()
