"""Env workers on Ray: one worker per node as one pool, events across the hop, a killed worker.

The cluster tests run a real local Ray cluster (a head and one more node process, through
`ray.cluster_utils.Cluster`) and real Docker; one cluster serves the whole module.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import docker
import pytest

from envs.example.env import FileCheckEnv
from foundation.clock import LoopClock
from harness.errors import ConfigError, WorkerGoneError
from harness.events import EventBus, EventRecorder, Phase
from harness.fleet import ClockOffset, ClockSample, RayNode, RayPoolConfig, ray_fleet
from harness.fleet.protocol import LeasePool
from harness.fleet.ray_worker import reap_worker_containers
from harness.fleet.ray_workers import RayFleet, node_pool_config, select_nodes
from harness.pool import PoolConfig
from harness.sandbox import ContainerLimits, ExecLimits
from harness.sandbox.labels import MANAGED_LABEL, parse_owner
from tests.ray_cluster import local_ray_cluster

pytestmark = pytest.mark.ray

EXEC = ExecLimits(kill_grace_s=1, host_grace_s=3)
FACTORY = functools.partial(FileCheckEnv, max_steps=5)  # pickled by reference to the workers


# -- the worker clock's offset (pure) ---------------------------------------------------------


def test_the_offset_comes_from_the_round_trip_with_the_least_delay() -> None:
    offset = ClockOffset(window=4)
    offset.observe(ClockSample(sent_s=100.0, received_s=100.2, remote_s=10.0))  # slow: ±0.1
    offset.observe(ClockSample(sent_s=101.0, received_s=101.002, remote_s=11.0))  # fast
    offset.observe(ClockSample(sent_s=102.0, received_s=102.5, remote_s=11.5))  # slowest
    assert offset.offset_s == pytest.approx(90.001)
    assert offset.error_s == pytest.approx(0.001)


def test_old_round_trips_age_out_of_the_window() -> None:
    offset = ClockOffset(window=2)
    offset.observe(ClockSample(0.0, 0.001, remote_s=-5.0))  # the best, but old
    offset.observe(ClockSample(1.0, 1.1, remote_s=0.95))
    offset.observe(ClockSample(2.0, 2.1, remote_s=1.95))
    assert offset.offset_s == pytest.approx(0.1)


def test_a_mapped_time_is_never_after_the_reply_that_reported_it() -> None:
    offset = ClockOffset(window=1)
    offset.observe(ClockSample(10.0, 10.4, remote_s=0.0))  # offset 10.2 (error ±0.2)
    assert offset.to_local(0.1, received_s=10.4) == pytest.approx(10.3)
    assert offset.to_local(0.35, received_s=10.4) == 10.4


def test_a_reply_before_its_request_is_refused() -> None:
    with pytest.raises(ValueError, match="before its request"):
        ClockSample(sent_s=2.0, received_s=1.0, remote_s=0.0)


# -- nodes and their pool settings (pure) -----------------------------------------------------


def _record(node_id: str, address: str, *, alive: bool = True, **resources: float) -> dict:
    return {
        "NodeID": node_id,
        "NodeManagerAddress": address,
        "Alive": alive,
        "Resources": {"CPU": 4.0, **resources},
    }


def test_workers_go_to_alive_nodes_that_have_the_named_resource() -> None:
    records = [
        _record("a" * 56, "10.0.0.1"),
        _record("b" * 56, "10.0.0.2", docker=1.0),
        _record("c" * 56, "10.0.0.3", alive=False, docker=1.0),
    ]
    assert [node.address for node in select_nodes(records, None)] == ["10.0.0.1", "10.0.0.2"]
    assert [node.address for node in select_nodes(records, "docker")] == ["10.0.0.2"]


def test_per_node_settings_apply_by_address_then_node_id_over_the_pool() -> None:
    base = PoolConfig(max_live=8, act_slots=4, container=ContainerLimits(memory_mb=512))
    node = RayNode("f" * 56, "10.0.0.2")
    per_node: dict[str, dict[str, object]] = {
        "10.0.0.2": {"max_live": 64, "act_slots": 16},
        "f" * 56: {"act_slots": 32, "container": {"cpus": 2.0}},
    }
    config = node_pool_config(base, per_node, node)
    assert (config.max_live, config.act_slots) == (64, 32)
    assert config.container.memory_mb == 512 and config.container.cpus == 2.0
    assert node_pool_config(base, per_node, RayNode("e" * 56, "10.0.0.9")) == base


def test_a_per_node_setting_that_is_no_pool_setting_is_refused() -> None:
    with pytest.raises(ValueError, match=r"per_node\['10.0.0.2'\].*max_lives: Extra inputs"):
        RayPoolConfig(per_node={"10.0.0.2": {"max_lives": 4}})


def test_ray_workers_and_several_docker_hosts_do_not_combine() -> None:
    hosts = PoolConfig.model_fields.get("hosts")
    if hosts is None:
        pytest.skip("this PoolConfig has no `hosts` (several Docker hosts) yet")
    config = PoolConfig.model_validate(
        {"hosts": [{"name": "h1", "endpoint": "unix:///var/run/docker.sock"}]}
    )
    with pytest.raises(ConfigError, match=r"pool\.hosts and Ray"):
        ray_fleet(config, RayPoolConfig(), bus=EventBus(), clock=LoopClock())


def test_a_factory_is_pickled_once_and_equal_factories_share_a_key() -> None:
    pytest.importorskip("ray", reason="no Ray: pip install 'aio-conductor[ray]'")
    from harness.fleet.ray_member import FactoryCache

    cache = FactoryCache()
    key, payload = cache.entry(FACTORY)
    assert cache.entry(FACTORY)[1] is payload  # the same bytes: not pickled again
    twin = functools.partial(FileCheckEnv, max_steps=5)
    assert cache.entry(twin)[0] == key  # the worker unpickles it once for both
    assert cache.entry(functools.partial(FileCheckEnv, max_steps=6))[0] != key


def test_importing_the_fleet_does_not_import_ray() -> None:
    code = "import sys, harness.fleet, harness.fleet.ray_workers; print('ray' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "False"


# -- a real cluster with real Docker ----------------------------------------------------------


@dataclass(slots=True)
class _Cluster:
    ray: ModuleType
    cluster: Any  # ray.cluster_utils.Cluster
    second_node: Any  # the node process added to the head (the last test removes it)
    worker_pids: set[int]  # every worker the tests started, to check they are all gone


@pytest.fixture(scope="module")
def ray_cluster(docker_client: docker.DockerClient, base_image: str) -> Iterator[_Cluster]:
    """A head and one more node (separate raylets) on this machine; afterwards, no Ray process
    of it is left, and no container of any of its workers."""
    with local_ray_cluster() as running:
        state = _Cluster(running.ray, running.cluster, running.nodes[0], set())
        yield state
    deadline = time.monotonic() + 20
    while any(_pid_alive(pid) for pid in state.worker_pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in state.worker_pids if _pid_alive(pid)], "a worker process is left"
    assert _containers_of(docker_client, state.worker_pids) == []


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _containers_of(client: docker.DockerClient, pids: set[int]) -> list[str]:
    """Project containers whose owner label names one of `pids` on this host."""
    found = []
    for record in client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"}):
        owner = parse_owner(record.get("Labels") or {})
        if owner is not None and owner.pid in pids and owner.host == socket.gethostname():
            found.append(str(record["Id"]))
    return found


def _fleet(cluster: _Cluster, bus: EventBus, **pool: object) -> RayFleet:
    settings: dict[str, object] = {
        "backend": "docker",
        "warm_per_image": 0,
        "max_live": 2,
        "act_slots": 2,
        "container": {"memory_mb": 256},
        "exec": EXEC.model_dump(),
        **pool,
    }
    ray_config = RayPoolConfig(
        actor_num_cpus=0.25, refresh_s=0.2, reap_settle_s=1.0, reap_timeout_s=10
    )
    return ray_fleet(PoolConfig.model_validate(settings), ray_config, bus=bus, clock=LoopClock())


def _track(fleet: RayFleet, cluster: _Cluster) -> RayFleet:
    """Remember the fleet's worker processes, for the module's final leak check."""
    cluster.worker_pids.update(m.info.pid for m in fleet.members if m.info is not None)
    return fleet


@dataclass(frozen=True, slots=True)
class _Attempt:
    sample_id: str
    member: str
    reward: float | None  # None: it ended with an infra error
    infra_error: str | None


async def _attempt(
    pool: LeasePool, image: str, sample_id: str, first_action: str, acting: asyncio.Event
) -> _Attempt:
    """One attempt of a sample: the first action, then the solution and `submit`."""
    lease = await pool.acquire(FACTORY, image, sample_id=sample_id, group_id="g")
    member = getattr(lease, "member", "?")
    try:
        _, info = await lease.areset(seed=0)
        actions = [first_action, f"printf {info['word'][::-1]} > answer.txt", "submit"]
        for index, action in enumerate(actions):
            if index == 0:
                acting.set()
            _, reward, terminated, truncated, step_info = await lease.astep(action)
            if lease.infra_error is not None:
                assert step_info["truncation_reason"] == "infra_error" and truncated
                return _Attempt(sample_id, member, None, lease.infra_error)
            if terminated or truncated:
                return _Attempt(sample_id, member, reward, None)
        raise AssertionError(f"{sample_id}: the episode did not end")
    finally:
        await lease.release()


async def _play(
    pool: LeasePool, image: str, sample_id: str, first_action: str, acting: asyncio.Event
) -> list[_Attempt]:
    """A sample, retried after infra errors (as the rollout layer does) until it completes."""
    attempts = [await _attempt(pool, image, sample_id, first_action, acting)]
    while attempts[-1].infra_error is not None:
        attempts.append(await _attempt(pool, image, sample_id, "true", asyncio.Event()))
    return attempts


@pytest.mark.docker
@pytest.mark.slow
async def test_episodes_are_placed_on_both_nodes_and_solved_there(
    ray_cluster: _Cluster, base_image: str, docker_client: docker.DockerClient
) -> None:
    async with _fleet(ray_cluster, EventBus()) as fleet:
        _track(fleet, ray_cluster)
        assert len(fleet.members) == 2 and fleet.capacity == 4
        played = await asyncio.gather(
            *(_play(fleet, base_image, f"s{i}", "true", asyncio.Event()) for i in range(4))
        )
        per_member = fleet.member_stats()
    attempts = [attempt for sample in played for attempt in sample]
    assert [attempt.reward for attempt in attempts] == [1.0] * 4
    assert Counter(attempt.member for attempt in attempts) == {m.name: 2 for m in fleet.members}
    assert all(stats.cold_starts + stats.warm_hits == 2 for stats in per_member.values())
    assert _containers_of(docker_client, ray_cluster.worker_pids) == []


@pytest.mark.docker
@pytest.mark.slow
async def test_a_killed_worker_costs_its_samples_one_retry_each_and_leaves_no_container(
    ray_cluster: _Cluster, base_image: str, docker_client: docker.DockerClient
) -> None:
    bus, recorder = EventBus(), EventRecorder()
    bus.subscribe(recorder)
    async with _fleet(ray_cluster, bus) as fleet:
        _track(fleet, ray_cluster)
        acting = [asyncio.Event() for _ in range(4)]
        samples = [
            asyncio.create_task(_play(fleet, base_image, f"s{i}", "sleep 4", acting[i]))
            for i in range(4)
        ]
        await asyncio.gather(*(event.wait() for event in acting))
        await asyncio.sleep(1.0)  # every first step is on its worker (starting or sleeping)
        victim, survivor = fleet.members[1], fleet.members[0]
        assert victim.leased == 2 and victim.info is not None
        victim_containers = len(_containers_of(docker_client, {victim.info.pid}))
        ray_cluster.ray.kill(victim.actor, no_restart=True)
        played = await asyncio.gather(*samples)
        with pytest.raises(WorkerGoneError):
            await victim.acquire(FACTORY, base_image)
        assert list(fleet.down()) == [victim.name]
    attempts = [attempt for sample in played for attempt in sample]
    failed = [attempt for attempt in attempts if attempt.infra_error is not None]
    assert len(failed) == 2 and {attempt.member for attempt in failed} == {victim.name}
    assert all("worker_gone" in (attempt.infra_error or "") for attempt in failed)
    assert sorted(sample[-1].sample_id for sample in played if sample[-1].reward == 1.0) == [
        "s0", "s1", "s2", "s3",
    ]  # fmt: skip
    assert all(len(sample) in (1, 2) for sample in played)
    retried = [sample[-1] for sample in played if len(sample) == 2]
    assert retried and all(attempt.member == survivor.name for attempt in retried)
    rewards = recorder.of_phase(Phase.REWARD)  # one per attempt: none lost, none twice
    assert Counter(event.sample_id for event in rewards) == Counter(a.sample_id for a in attempts)
    assert sum(1 for event in rewards if event.data["infra_error"]) == 2
    assert victim_containers > 0 and victim.reaped >= victim_containers
    assert _containers_of(docker_client, ray_cluster.worker_pids) == []


@pytest.mark.docker
@pytest.mark.slow
async def test_step_events_reach_the_conductors_bus_on_its_clock(
    ray_cluster: _Cluster, base_image: str
) -> None:
    bus, recorder, clock = EventBus(), EventRecorder(), LoopClock()
    bus.subscribe(recorder)
    async with _fleet(ray_cluster, bus) as fleet:
        _track(fleet, ray_cluster)
        acquired_s = clock.now()
        lease = await fleet.acquire(FACTORY, base_image, sample_id="s1", group_id="g1")
        _, info = await lease.areset(seed=0)
        windows = []
        for action in (f"printf {info['word'][::-1]} > answer.txt", "submit"):
            before_s = clock.now()
            _, reward, _, _, _ = await lease.astep(action)
            windows.append((before_s, clock.now()))
        await lease.release()
    assert reward == 1.0
    phases = [event.phase for event in recorder.events]
    assert phases.count(Phase.ENV_INIT) == 1 and phases.count(Phase.ACT) == 2
    assert phases[-1] == Phase.REWARD and recorder.events[-1].data["reward"] == 1.0
    assert {(event.sample_id, event.group_id) for event in recorder.events} == {("s1", "g1")}
    tolerance_s = 0.05  # the offset's error: half a round trip on this machine
    env_init = recorder.of_phase(Phase.ENV_INIT)[0]
    assert acquired_s - tolerance_s <= env_init.start_s <= env_init.end_s <= windows[0][1]
    for act, (before_s, after_s) in zip(recorder.of_phase(Phase.ACT), windows, strict=True):
        assert before_s - tolerance_s <= act.start_s <= act.end_s <= after_s
        assert act.duration_s > 0


async def _start_four_then(fleet: RayFleet, image: str, kill: Any) -> list[list[_Attempt]]:
    """Four samples, two per node, each first sleeping 4 s; `kill()` while all are mid-step."""
    acting = [asyncio.Event() for _ in range(4)]
    samples = [
        asyncio.create_task(_play(fleet, image, f"s{i}", "sleep 4", acting[i])) for i in range(4)
    ]
    await asyncio.gather(*(event.wait() for event in acting))
    await asyncio.sleep(1.0)  # every first step is on its worker (starting or sleeping)
    kill()
    return list(await asyncio.gather(*samples))


@pytest.mark.docker
@pytest.mark.slow
async def test_a_node_that_dies_mid_episode_costs_its_samples_a_retry_and_not_the_run(
    ray_cluster: _Cluster, base_image: str, docker_client: docker.DockerClient
) -> None:
    """The last test of the module: it takes the second node away."""
    bus, recorder = EventBus(), EventRecorder()
    bus.subscribe(recorder)
    async with _fleet(ray_cluster, bus) as fleet:
        _track(fleet, ray_cluster)
        node_id = ray_cluster.second_node.node_id
        victim = next(member for member in fleet.members if member.node.node_id == node_id)
        assert victim.info is not None
        dead_pid = victim.info.pid
        played = await _start_four_then(
            fleet,
            base_image,
            lambda: ray_cluster.cluster.remove_node(ray_cluster.second_node, allow_graceful=False),
        )
        assert list(fleet.down()) == [victim.name]
    attempts = [attempt for sample in played for attempt in sample]
    failed = [attempt for attempt in attempts if attempt.infra_error is not None]
    assert {attempt.member for attempt in failed} == {victim.name} and len(failed) == 2
    assert all(sample[-1].reward == 1.0 for sample in played)
    rewards = recorder.of_phase(Phase.REWARD)
    assert Counter(event.sample_id for event in rewards) == Counter(a.sample_id for a in attempts)
    # Its node is gone, so the removal pinned there could not run: the host's reaper (its next
    # pool start, or `conductor envs reap`) removes what the dead worker left.
    left = _containers_of(docker_client, {dead_pid})
    assert reap_worker_containers(dead_pid) >= len(left)
    assert _containers_of(docker_client, {dead_pid}) == []
