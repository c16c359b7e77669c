"""EnvPool: warm start, leases, act slots, events, dead sandboxes, cleanup."""

from __future__ import annotations

import asyncio
from pathlib import Path

import docker
import pytest

from envs.example.env import FileCheckEnv
from harness.backends import DockerBackend, LocalBackend
from harness.errors import DockerGoneError, DockerUnavailableError
from harness.events import EventBus, EventRecorder, Phase
from harness.handle import SandboxHandle
from harness.pool import EnvPool, PoolConfig
from harness.sandbox import ContainerLimits, ExecLimits, Sandbox
from tests.conftest import project_containers

EXEC = ExecLimits(kill_grace_s=1, host_grace_s=3)


def example_env(handle: SandboxHandle) -> FileCheckEnv:
    return FileCheckEnv(handle, max_steps=5)


def local_pool(bus: EventBus | None = None, **overrides: object) -> EnvPool:
    settings: dict[str, object] = {"warm_per_image": 1, "max_live": 4, "act_slots": 2}
    config = PoolConfig.model_validate({"backend": "local", **settings, **overrides})
    return EnvPool(LocalBackend(exec_limits=EXEC), config, bus=bus)


async def _solve(lease_env_word: str) -> list[str]:
    reversed_word = lease_env_word[::-1]
    return [f"printf {reversed_word} > answer.txt", "submit"]


async def test_episode_through_the_pool_emits_env_init_act_and_reward_events() -> None:
    bus, recorder = EventBus(), EventRecorder()
    bus.subscribe(recorder)
    async with local_pool(bus) as pool:
        lease = await pool.acquire(example_env, "img", sample_id="s1", group_id="g1")
        _, info = await lease.areset(seed=1)
        for action in await _solve(info["word"]):
            _, reward, terminated, _, _ = await lease.astep(action)
        await lease.release()
    assert terminated and reward == 1.0
    phases = [event.phase for event in recorder.events]
    assert phases.count(Phase.ENV_INIT) == 1 and phases.count(Phase.ACT) == 2
    assert phases[-1] == Phase.REWARD and recorder.events[-1].data["reward"] == 1.0
    assert {event.sample_id for event in recorder.events} == {"s1"}


async def test_acquire_returns_before_the_sandbox_exists() -> None:
    async with local_pool(warm_per_image=0) as pool:
        lease = await pool.acquire(example_env, "img")
        observation, _ = await lease.areset(seed=0)
        assert "answer.txt" in observation and not lease.handle.ready
        await lease.astep("true")
        assert lease.handle.ready
        await lease.release()


async def test_warm_acquire_is_served_from_the_warm_set() -> None:
    async with local_pool() as pool:
        await pool.wait_warm("img")
        lease = await pool.acquire(example_env, "img")
        assert lease.handle.ready
        assert pool.stats().warm_hits == 1 and pool.stats().cold_starts == 0
        await lease.release()


async def test_warm_set_refills_after_a_lease_takes_one() -> None:
    async with local_pool() as pool:
        await pool.wait_warm("img")
        lease = await pool.acquire(example_env, "img")
        await pool.wait_warm("img")
        assert pool.warm_count("img") == 1
        await lease.release()


async def test_live_sandboxes_never_exceed_max_live() -> None:
    async with local_pool(warm_per_image=2, max_live=3) as pool:
        pool.prewarm(["a", "b"])
        leases = [await pool.acquire(example_env, "a") for _ in range(5)]
        for lease in leases[:3]:
            await lease.areset(seed=0)
        await asyncio.gather(*(lease.astep("true") for lease in leases[:3]))
        assert pool.stats().live <= 3
        for lease in leases:
            await lease.release()


async def test_act_slots_go_to_the_higher_priority_step_first() -> None:
    started: list[str] = []
    async with local_pool(act_slots=1) as pool:
        blocker = await pool.acquire(example_env, "img", priority=0)
        low = await pool.acquire(example_env, "img", sample_id="low", priority=0)
        high = await pool.acquire(example_env, "img", sample_id="high", priority=1)
        for lease in (blocker, low, high):
            await lease.areset(seed=0)
            await lease.handle.get()
        pool.bus.subscribe(
            lambda event: started.append(event.sample_id) if event.phase == Phase.ACT else None
        )
        hold = asyncio.create_task(blocker.astep("sleep 0.5"))
        await asyncio.sleep(0.1)
        await asyncio.gather(low.astep("true"), high.astep("true"))
        await hold
        for lease in (blocker, low, high):
            await lease.release()
    assert started[-2:] == ["high", "low"]


async def test_pre_act_time_covers_waiting_for_the_sandbox() -> None:
    async with local_pool(warm_per_image=0) as pool:
        lease = await pool.acquire(example_env, "img")
        await lease.areset(seed=0)
        _, _, _, _, info = await lease.astep("true")
        assert info["pre_act_s"] >= 0 and info["act_s"] > 0
        await lease.release()


@pytest.mark.docker
async def test_docker_warm_acquire_starts_no_container(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    backend = DockerBackend(docker_client, limits=ContainerLimits(memory_mb=256), exec_limits=EXEC)
    config = PoolConfig(warm_per_image=2, max_live=4)
    async with EnvPool(backend, config) as pool:
        await pool.wait_warm(base_image)
        before = set(project_containers(docker_client))
        lease = await pool.acquire(example_env, base_image)
        assert lease.handle.ready and set(project_containers(docker_client)) == before
        _, info = await lease.areset(seed=2)
        for action in await _solve(info["word"]):
            _, reward, *_ = await lease.astep(action)
        assert reward == 1.0
        await lease.release()
    assert project_containers(docker_client) == []


@pytest.mark.docker
async def test_dead_container_gives_infra_error_and_is_replaced(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    backend = DockerBackend(docker_client, limits=ContainerLimits(memory_mb=256), exec_limits=EXEC)
    async with EnvPool(backend, PoolConfig(warm_per_image=1, max_live=4)) as pool:
        await pool.wait_warm(base_image)
        lease = await pool.acquire(example_env, base_image, sample_id="s")
        await lease.areset(seed=0)
        sandbox = await lease.handle.get()
        docker_client.containers.get(sandbox.container_id).remove(force=True)  # type: ignore[attr-defined]
        observation, reward, terminated, truncated, info = await lease.astep("true")
        assert truncated and not terminated and reward == 0.0
        assert "infra_error" in info and lease.infra_error is not None
        assert "infrastructure error" in observation
        await lease.release()
        await pool.wait_warm(base_image)
        assert pool.stats().replaced_dead == 1
    assert project_containers(docker_client) == []


class _DaemonAwayBackend(LocalBackend):
    """A local backend whose starts fail as a Docker daemon's do while it is away."""

    daemon_up = True

    async def create(self, image: str) -> Sandbox:
        if not self.daemon_up:
            raise DockerUnavailableError("the Docker daemon did not answer (test)")
        return await super().create(image)


async def test_a_daemon_outage_drops_the_warm_set_and_past_its_bound_refuses_leases(
    tmp_path: Path,
) -> None:
    backend = _DaemonAwayBackend(exec_limits=EXEC)
    image = "tpl"
    backend.add_image(image, tmp_path)
    config = PoolConfig(backend="local", warm_per_image=2, max_live=4, daemon_outage_s=0.5)
    async with EnvPool(backend, config) as pool:
        await pool.wait_warm(image)
        backend.daemon_up = False
        first = await pool.acquire(example_env, image)  # a warm one; the refill meets the outage
        async with asyncio.timeout(5):
            while pool.warm_count(image):  # noqa: ASYNC110 (the pool has no event for this)
                await asyncio.sleep(0.05)  # the other warm one is dropped: it cannot be trusted
        second = await pool.acquire(example_env, image)  # cold: waits out the outage, gives up
        with pytest.raises(DockerGoneError, match=r"pool\.daemon_outage_s"):
            await second.handle.get()
        with pytest.raises(DockerGoneError):
            await pool.acquire(example_env, image)
        await first.release()
        await second.release()
