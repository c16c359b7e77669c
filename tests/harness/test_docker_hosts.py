"""Several Docker hosts without Ray (`pool.hosts`): config, endpoints, and a real second daemon.

The Docker tests run the machine's daemon and a private one on its own socket, data root and
network namespace (`PrivateDockerd`), as two hosts of one fleet.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from pydantic import ValidationError

from envs.example.env import FileCheckEnv
from harness.backends import DockerBackend
from harness.errors import (
    ConfigError,
    DockerGoneError,
    DockerUnavailableError,
    ImageNotFoundError,
)
from harness.events import EventBus
from harness.fleet import PoolFleet
from harness.fleet.build import build_pool
from harness.fleet.docker_hosts import (
    ContextEndpoint,
    DockerHostPool,
    HostEndpoint,
    docker_host_pools,
    host_backends,
    reap_hosts,
    resolve_endpoints,
)
from harness.handle import SandboxHandle
from harness.pool import DockerHostConfig, EnvPool, PoolConfig
from harness.reaper import ReapReport, reap_containers
from harness.sandbox.labels import MANAGED_LABEL, parse_owner
from rollout.cli.run import DEFAULT_RUN_CONFIG
from tests.conftest import project_containers
from tests.harness.private_dockerd import PrivateDockerd, running_private_dockerd

EXEC = {"kill_grace_s": 1, "host_grace_s": 3}
MAIN_SOCKET = "unix:///var/run/docker.sock"
REPO = Path(__file__).resolve().parents[2]


def example_env(handle: SandboxHandle) -> FileCheckEnv:
    return FileCheckEnv(handle, max_steps=5)


def _pool_config(hosts: list[dict[str, object]], **settings: object) -> PoolConfig:
    defaults: dict[str, object] = {"warm_per_image": 0, "max_live": 4, "exec": EXEC}
    return PoolConfig.model_validate({**defaults, **settings, "hosts": hosts})


# -- config (no Docker) -----------------------------------------------------------------------


def test_no_hosts_is_the_one_local_pool_as_before() -> None:
    config = PoolConfig()
    assert config.hosts == ()
    pool = build_pool(config, DockerBackend(docker.DockerClient(version="1.41")), **_shared())
    assert isinstance(pool, EnvPool) and not isinstance(pool, DockerHostPool)


def test_hosts_take_endpoint_urls_or_contexts_and_override_the_pool_limits() -> None:
    config = _pool_config(
        [
            {"name": "a", "endpoint": "unix:///run/a.sock", "max_live": 2, "act_slots": 1},
            {"name": "b", "context": "remote-b", "daemon_outage_s": 5},
        ],
        act_slots=8,
        start_concurrency=3,
    )
    a, b = (config.for_host(host) for host in config.hosts)
    assert (a.max_live, a.act_slots, a.start_concurrency, a.hosts) == (2, 1, 3, ())
    assert (b.max_live, b.act_slots, b.daemon_outage_s) == (4, 8, 5)


@pytest.mark.parametrize(
    ("hosts", "settings", "message"),
    [
        (
            [{"name": "a", "endpoint": "unix:///a.sock"}, {"name": "a", "endpoint": "tcp://b:1"}],
            {},
            "names must be unique; repeated: a",
        ),
        ([{"name": "a", "endpoint": "http//a:2375"}], {}, "not a Docker URL"),
        ([{"name": "a", "endpoint": "ssh://me@a"}], {}, "use one of unix://, tcp://"),
        ([{"name": "a"}], {}, "exactly one of `endpoint`"),
        ([{"name": "a", "endpoint": "tcp://a:1", "context": "a"}], {}, "exactly one of"),
        ([{"name": "a b", "endpoint": "tcp://a:1"}], {}, "pattern"),
        ([{"name": "a", "endpoint": "tcp://a:1", "max_live": 0}], {}, "greater than or equal"),
        ([{"name": "a", "endpoint": "tcp://a:1"}], {"backend": "local"}, "not local"),
        ([{"name": "a", "endpoint": "tcp://a:1", "maxlive": 2}], {}, "Extra inputs"),
    ],
)
def test_bad_hosts_are_refused_with_the_reason(
    hosts: list[dict[str, object]], settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        _pool_config(hosts, **settings)


def test_a_context_resolves_to_its_endpoint_and_an_unknown_one_is_named() -> None:
    config = _pool_config(
        [{"name": "a", "context": "remote"}, {"name": "b", "endpoint": "tcp://b:2375"}]
    )
    contexts = {"remote": ContextEndpoint("tcp://10.0.0.9:2376")}
    assert resolve_endpoints(config.hosts, contexts) == [
        HostEndpoint("a", "tcp://10.0.0.9:2376"),
        HostEndpoint("b", "tcp://b:2375"),
    ]
    with pytest.raises(ConfigError, match=r"context 'remote'.*does not exist \(known: none\)"):
        resolve_endpoints(config.hosts, {})


def test_two_hosts_on_one_daemon_are_refused() -> None:
    config = _pool_config(
        [{"name": "a", "context": "same"}, {"name": "b", "endpoint": "tcp://x:2375"}]
    )
    with pytest.raises(ConfigError, match="'a' and 'b' are the same daemon"):
        resolve_endpoints(config.hosts, {"same": ContextEndpoint("tcp://x:2375")})


def test_the_pool_config_yaml_takes_hosts_as_an_override() -> None:
    from foundation.config import load_config

    default = Path(__file__).resolve().parents[2] / "configs/pool/default.yaml"
    config = load_config(
        PoolConfig,
        default,
        ["hosts=[{name: a, endpoint: unix:///run/a.sock, max_live: 3}, {name: b, context: c}]"],
    )
    assert config.hosts == (
        DockerHostConfig(name="a", endpoint="unix:///run/a.sock", max_live=3),
        DockerHostConfig(name="b", context="c"),
    )
    assert load_config(PoolConfig, default).hosts == ()


def test_a_fleet_builds_without_asking_any_host() -> None:
    """Building needs no answer: a host that is down is found down when the fleet starts."""
    config = _pool_config([{"name": "gone", "endpoint": "unix:///nonexistent/d.sock"}])
    fleet = docker_host_pools(config, **_shared())
    assert isinstance(fleet, PoolFleet) and fleet.members == ("gone",)


def _shared() -> dict[str, object]:
    from foundation.clock import LoopClock

    return {"bus": EventBus(), "clock": LoopClock()}


# -- two real daemons -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def second(docker_client: docker.DockerClient, base_image: str) -> Iterator[PrivateDockerd]:
    with running_private_dockerd(Path(f"/tmp/conductor-test-hosts-{os.getpid()}")) as daemon:
        yield daemon


def _ours(client: docker.DockerClient) -> int:
    """Project containers this test process made there (other runs share the main daemon)."""
    return len(project_containers(client))


def _two_hosts(second: PrivateDockerd, **second_settings: object) -> list[dict[str, object]]:
    return [
        {"name": "main", "endpoint": MAIN_SOCKET},
        {"name": "second", "endpoint": second.url, **second_settings},
    ]


def _fleet(config: PoolConfig, images: list[str], source: docker.DockerClient | None) -> PoolFleet:
    from foundation.clock import LoopClock

    return docker_host_pools(
        config, bus=EventBus(), clock=LoopClock(), images=images, image_source=source
    )


async def _play(fleet: PoolFleet, image: str, count: int) -> list[object]:
    leases = [await fleet.acquire(example_env, image, sample_id=f"s{i}") for i in range(count)]
    for lease in leases:
        await lease.areset(seed=0)
    steps = await asyncio.gather(*(lease.astep("echo hi") for lease in leases))
    assert all(not info.get("infra_error") for *_, info in steps)
    return list(leases)


@pytest.mark.docker
async def test_a_host_lacking_the_image_gets_it_from_the_image_source(
    docker_client: docker.DockerClient, base_image: str, second: PrivateDockerd
) -> None:
    other = second.client()
    if any(base_image in image.tags for image in other.images.list()):
        other.images.remove(base_image, force=True)
    config = _pool_config([{"name": "second", "endpoint": second.url}])
    async with _fleet(config, [base_image], docker_client) as fleet:
        assert fleet.down() == {}
        [lease] = await _play(fleet, base_image, 1)
        await lease.release()  # type: ignore[attr-defined]
    assert base_image in other.images.get(base_image).tags


@pytest.mark.docker
async def test_a_host_lacking_the_image_without_a_source_is_down_with_the_command_to_run(
    second: PrivateDockerd,
) -> None:
    config = _pool_config([{"name": "second", "endpoint": second.url}])
    with pytest.raises(DockerGoneError) as gone:
        async with _fleet(config, ["aio-conductor/not-built:0"], None):
            pass
    message = str(gone.value)
    assert "image 'aio-conductor/not-built:0' is not on Docker host second" in message
    assert f"docker save aio-conductor/not-built:0 | docker -H {second.url} load" in message


@pytest.mark.docker
async def test_leases_spread_over_both_daemons_within_each_hosts_max_live(
    docker_client: docker.DockerClient, base_image: str, second: PrivateDockerd
) -> None:
    other = second.client()
    config = _pool_config(_two_hosts(second, max_live=2), max_live=3)
    async with _fleet(config, [base_image], docker_client) as fleet:
        leases = await _play(fleet, base_image, 5)
        on_each = (_ours(docker_client), _ours(other))
        assert on_each == (3, 2)  # both daemons run containers, each up to its own max_live
        waiting = await fleet.acquire(example_env, base_image, sample_id="s5")
        await waiting.areset(seed=0)
        step = asyncio.create_task(waiting.astep("echo hi"))
        await asyncio.sleep(1.0)
        assert not step.done() and (_ours(docker_client), _ours(other)) == on_each
        await leases[0].release()  # type: ignore[attr-defined]
        *_, info = await asyncio.wait_for(step, 30)
        assert not info.get("infra_error")
        for lease in [*leases[1:], waiting]:
            await lease.release()  # type: ignore[attr-defined]
    assert (_ours(docker_client), _ours(other)) == (0, 0)


@pytest.mark.docker
async def test_a_host_whose_daemon_stops_mid_run_costs_retries_and_new_leases_go_elsewhere(
    docker_client: docker.DockerClient, base_image: str, second: PrivateDockerd
) -> None:
    config = _pool_config(_two_hosts(second, daemon_outage_s=1), max_live=2)
    stopped = False
    try:
        async with _fleet(config, [base_image], docker_client) as fleet:
            leases = await _play(fleet, base_image, 4)
            leased = {name: stats.leased for name, stats in fleet.member_stats().items()}
            assert leased == {"main": 2, "second": 2}
            await asyncio.to_thread(second.stop)
            stopped = True
            await _lose_the_second_host(fleet, leases, docker_client, base_image)
        assert _ours(docker_client) == 0
    finally:
        if stopped:
            second.start()  # the next run finds the stopped containers there, and reaps them
    left = second.client().containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
    assert all(container.status != "running" for container in left)
    reap_containers(second.client(), remove_all=True)
    assert _ours(second.client()) == 0


async def _lose_the_second_host(
    fleet: PoolFleet, leases: list[object], docker_client: docker.DockerClient, base_image: str
) -> None:
    """With the second host's daemon stopped: its samples fail, then it is marked down."""
    steps = await asyncio.gather(*(lease.astep("echo hi") for lease in leases))
    infra = [info.get("infra_error") for *_, info in steps]
    assert sum(bool(error) for error in infra) == 2  # the second host's two samples
    assert all("sandbox_dead" in error for error in infra if error)
    on_main = [lease for lease, error in zip(leases, infra, strict=True) if not error]
    for lease, error in zip(leases, infra, strict=True):
        if error:
            await lease.release()  # type: ignore[attr-defined]
    # The main host is full: the next lease goes to the stopped one, whose start waits out
    # its daemon_outage_s and gives up (an infra error: the sample is retried) ...
    stranded = await fleet.acquire(example_env, base_image, sample_id="s4")
    await stranded.areset(seed=0)
    *_, info = await stranded.astep("echo hi")
    assert "sandbox_start_failed" in info["infra_error"]
    await stranded.release()
    # ... and from then on the host is down: new leases wait for room on the main host.
    moved = await fleet.acquire(example_env, base_image, sample_id="s5")
    assert "pool.daemon_outage_s" in fleet.down()["second"]
    await moved.areset(seed=0)
    await on_main[0].release()  # type: ignore[attr-defined]
    *_, info = await asyncio.wait_for(moved.astep("echo hi"), 30)
    assert not info.get("infra_error")
    assert fleet.member_stats()["main"].leased == 2 and _ours(docker_client) == 2
    for lease in (on_main[1], moved):
        await lease.release()  # type: ignore[attr-defined]


@pytest.mark.docker
async def test_every_host_down_at_start_ends_with_one_line(base_image: str) -> None:
    config = _pool_config(
        [
            {"name": "a", "endpoint": "unix:///nonexistent/a.sock"},
            {"name": "b", "endpoint": "unix:///nonexistent/b.sock"},
        ]
    )
    with pytest.raises(DockerGoneError) as gone:
        async with _fleet(config, [base_image], None):
            pass
    message = str(gone.value)
    assert "\n" not in message and "no pool member could start" in message
    assert "Docker host a (unix:///nonexistent/a.sock)" in message and "b (" in message


@pytest.mark.docker
async def test_reap_hosts_reaps_each_host_and_reports_one_that_is_down(
    docker_client: docker.DockerClient, second: PrivateDockerd
) -> None:
    config = _pool_config(
        [*_two_hosts(second), {"name": "gone", "endpoint": "unix:///nonexistent/d.sock"}]
    )
    reports = await reap_hosts(config)
    assert isinstance(reports["main"], ReapReport) and isinstance(reports["second"], ReapReport)
    assert "Docker host gone" in str(reports["gone"])


@pytest.mark.docker
async def test_a_sandbox_start_names_the_host_that_lacks_its_image_or_does_not_answer(
    second: PrivateDockerd,
) -> None:
    backend = DockerBackend(second.client(), host="h2", endpoint=second.url)
    with pytest.raises(ImageNotFoundError, match=r"not on Docker host h2 \(unix://.*docker -H"):
        await backend.create("aio-conductor/not-built:0")
    gone = DockerBackend(
        docker.DockerClient(base_url="unix:///nonexistent/d.sock", version="1.41"),
        host="h1",
        endpoint="unix:///nonexistent/d.sock",
    )
    with pytest.raises(DockerUnavailableError, match=r"Docker host h1 \(unix:///nonexistent"):
        await gone.create("img")


@pytest.mark.docker
@pytest.mark.slow
def test_conductor_run_spreads_its_samples_over_two_hosts(
    docker_client: docker.DockerClient, second: PrivateDockerd, tmp_path: Path
) -> None:
    """`conductor run` with `pool.hosts`: both daemons run its sandboxes, none is left."""
    other = second.client()
    hosts = (
        f'"hosts=[{{name: main, endpoint: {MAIN_SOCKET}, max_live: 3}}, '
        f'{{name: second, endpoint: {second.url}, max_live: 3}}]"'
    )
    command = [
        sys.executable, "-m", "rollout.cli", "run", str(DEFAULT_RUN_CONFIG),
        "steps=2", "groups_per_step=2", "group_size=2", "async_factor=1",
        "task_ids=[swe-taskset__spans-remove-drops-right-part]", "trainer.train_time_s=0.1",
        f"pool.overrides=[backend=docker, warm_per_image=1, act_slots=2, {hosts}]",
        "model.overrides=[cost.t_weights_s=0.0005]", "--out", str(tmp_path), "--no-report",
    ]  # fmt: skip
    run = subprocess.Popen(
        command, cwd=REPO, env={**os.environ, "COLUMNS": "160"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    peak = [0, 0]
    try:
        deadline = time.monotonic() + 240
        while run.poll() is None and time.monotonic() < deadline:
            counts = (_owned_by(docker_client, run.pid), _owned_by(other, run.pid))
            peak = [max(seen, now) for seen, now in zip(peak, counts, strict=True)]
            time.sleep(0.2)
    finally:
        if run.poll() is None:
            run.terminate()  # it removes its containers on SIGTERM
        output = run.communicate(timeout=120)[0]
    assert run.returncode == 0, output[-4000:]
    print(f"peak containers of the run per host (main, second): {peak}")  # shown with -s
    # Both daemons ran the run's sandboxes (grading sandboxes start on the main one, where the
    # run builds its images, so its count may pass the host's max_live).
    assert peak[0] >= 1 and peak[1] >= 1, f"containers seen per host: {peak}"
    assert _owned_by(docker_client, run.pid) == _owned_by(other, run.pid) == 0


def _owned_by(client: docker.DockerClient, pid: int) -> int:
    records = client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
    owners = [parse_owner(record.get("Labels") or {}) for record in records]
    return sum(1 for owner in owners if owner is not None and owner.pid == pid)


@pytest.mark.docker
def test_envs_reap_reaps_every_host_named_and_fails_for_one_that_is_down(
    second: PrivateDockerd,
) -> None:
    command = [
        sys.executable, "-m", "rollout.cli", "envs", "reap", "--all",
        "--host", second.url, "--host", "unix:///nonexistent/d.sock",
    ]  # fmt: skip
    reaped = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    output = reaped.stdout + reaped.stderr
    assert reaped.returncode == 1, output
    assert "cli-0: 0 removed" in output and "cli-1: not reaped" in output
    assert "1 host(s) did not answer: cli-1" in output


@pytest.mark.docker
def test_conductor_run_with_every_host_down_ends_with_one_clear_line(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    hosts = '"hosts=[{name: a, endpoint: unix:///nonexistent/a.sock}]"'
    command = [
        sys.executable, "-m", "rollout.cli", "run", str(DEFAULT_RUN_CONFIG),
        "steps=1", "groups_per_step=1", "group_size=2",
        "task_ids=[swe-taskset__spans-remove-drops-right-part]",
        f"pool.overrides=[backend=docker, {hosts}]", "--out", str(tmp_path), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "400"}
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "Traceback" not in output, output[-4000:]
    [line] = [line for line in output.splitlines() if "no pool member could start" in line]
    assert "Docker host a (unix:///nonexistent/a.sock)" in line


def test_the_default_docker_context_resolves_to_its_socket_and_an_unknown_one_fails() -> None:
    config = _pool_config([{"name": "main", "context": "default"}])
    [(host, backend)] = host_backends(config)
    assert host.name == backend.host == "main" and backend.endpoint.startswith("unix://")
    unknown = _pool_config([{"name": "x", "context": "no-such-context"}])
    with pytest.raises(ConfigError, match=r"context 'no-such-context'.*does not exist"):
        host_backends(unknown)
