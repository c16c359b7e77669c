"""PoolFleet: one pool over several members; placement by warm set, home and load; failover."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.example.env import FileCheckEnv
from harness.backends import LocalBackend
from harness.errors import DockerGoneError, DockerUnavailableError
from harness.events import EventBus, EventRecorder, Phase
from harness.fleet import FleetMember, MemberLoad, PoolFleet, choose_home, choose_member
from harness.handle import SandboxHandle
from harness.pool import EnvPool, PoolConfig
from harness.sandbox import ExecLimits, Sandbox

EXEC = ExecLimits(kill_grace_s=1, host_grace_s=3)


def example_env(handle: SandboxHandle) -> FileCheckEnv:
    return FileCheckEnv(handle, max_steps=5)


class _SwitchableBackend(LocalBackend):
    """A local backend whose "daemon" can be switched off."""

    def __init__(self) -> None:
        super().__init__(exec_limits=EXEC)
        self.daemon_up = True

    async def create(self, image: str) -> Sandbox:
        if not self.daemon_up:
            raise DockerUnavailableError("the daemon did not answer")
        return await super().create(image)


def _pool(backend: LocalBackend, bus: EventBus, **overrides: object) -> EnvPool:
    settings: dict[str, object] = {"warm_per_image": 1, "max_live": 4, "act_slots": 2}
    config = PoolConfig.model_validate({"backend": "local", **settings, **overrides})
    return EnvPool(backend, config, bus=bus)


def _fleet(
    bus: EventBus, *backends: LocalBackend, **overrides: object
) -> tuple[PoolFleet, list[EnvPool]]:
    pools = [_pool(backend, bus, **overrides) for backend in backends]
    members = [FleetMember(f"host{index}", pool) for index, pool in enumerate(pools)]
    return PoolFleet(members), pools


# -- placement (pure) -------------------------------------------------------------------------


def test_a_lease_goes_to_a_warm_sandbox_then_its_home_then_the_least_loaded() -> None:
    loads = [
        MemberLoad("a", up=True, leased=3, capacity=4),
        MemberLoad("b", up=True, leased=1, capacity=4),
        MemberLoad("c", up=True, leased=2, capacity=4, warm=1),
    ]
    assert choose_member(loads, home="a") == "c"  # a warm one beats a cold start
    no_warm = [load for load in loads if load.name != "c"]
    assert choose_member(no_warm, home="a") == "a"
    assert choose_member(no_warm, home=None) == "b"


def test_a_full_member_takes_a_lease_only_when_every_member_is_full() -> None:
    full_home = MemberLoad("a", up=True, leased=4, capacity=4, warm=1)
    other = MemberLoad("b", up=True, leased=3, capacity=4)
    assert choose_member([full_home, other], home="a") == "b"
    assert choose_member([full_home, MemberLoad("b", up=True, leased=8, capacity=4)], "a") == "a"


def test_no_member_up_means_no_placement() -> None:
    down = [MemberLoad("a", up=False, leased=0, capacity=4)]
    assert choose_member(down, home=None) is None and choose_home(down) is None


def test_homes_spread_in_proportion_to_capacity() -> None:
    big = MemberLoad("big", up=True, leased=0, capacity=8, homes=1)
    small = MemberLoad("small", up=True, leased=0, capacity=2, homes=1)
    assert choose_home([big, small]) == "big"  # 1/8 < 1/2
    assert choose_home([MemberLoad("big", up=True, leased=0, capacity=8, homes=5), small]) == (
        "small"
    )


# -- the fleet --------------------------------------------------------------------------------


async def test_images_are_homed_on_both_members_and_their_leases_go_home() -> None:
    bus = EventBus()
    fleet, pools = _fleet(bus, LocalBackend(exec_limits=EXEC), LocalBackend(exec_limits=EXEC))
    async with fleet:
        images = ["a", "b", "c", "d"]
        fleet.prewarm(images)
        for image in images:
            lease = await fleet.acquire(example_env, image)
            await lease.areset(seed=0)
            await lease.astep("true")
            await lease.release()
        cold_per_member = [pool.stats().warm_hits + pool.stats().cold_starts for pool in pools]
        assert cold_per_member == [2, 2]
        assert fleet.stats().warm_hits + fleet.stats().cold_starts == 4


async def test_leases_spill_over_when_the_home_member_is_full() -> None:
    bus = EventBus()
    fleet, pools = _fleet(
        bus, LocalBackend(exec_limits=EXEC), LocalBackend(exec_limits=EXEC), max_live=2
    )
    async with fleet:
        leases = [await fleet.acquire(example_env, "img", sample_id=f"s{i}") for i in range(4)]
        assert [pool.leased for pool in pools] == [2, 2]
        assert fleet.leased == 4 and fleet.capacity == 4
        for lease in leases:
            await lease.release()


async def test_a_member_whose_daemon_is_gone_is_marked_down_and_leases_go_elsewhere(
    tmp_path: Path,
) -> None:
    bus, recorder = EventBus(), EventRecorder()
    bus.subscribe(recorder)
    gone = _SwitchableBackend()
    gone.add_image("img", tmp_path)
    healthy = LocalBackend(exec_limits=EXEC)
    healthy.add_image("img", tmp_path)
    fleet, _ = _fleet(bus, gone, healthy, warm_per_image=0, daemon_outage_s=0)
    async with fleet:
        gone.daemon_up = False
        first = await fleet.acquire(example_env, "img", sample_id="s0")  # homed on host0
        await first.areset(seed=0)
        *_, truncated, info = await first.astep("true")
        assert truncated and "sandbox_start_failed" in info["infra_error"]  # retried, not graded
        await first.release()
        second = await fleet.acquire(example_env, "img", sample_id="s1")
        await second.areset(seed=0)
        _, _, _, truncated, info = await second.astep("true")
        assert not truncated and not info.get("infra_error")
        await second.release()
        assert list(fleet.down()) == ["host0"]
    acts = [event.sample_id for event in recorder.events if event.phase == Phase.ACT]
    assert acts == ["s1"]


async def test_every_member_down_ends_with_docker_gone(tmp_path: Path) -> None:
    backends = [_SwitchableBackend(), _SwitchableBackend()]
    for backend in backends:
        backend.add_image("img", tmp_path)
    fleet, _ = _fleet(EventBus(), *backends, warm_per_image=0, daemon_outage_s=0)
    async with fleet:
        for backend in backends:
            backend.daemon_up = False
        for index in range(2):  # each member's first start meets the outage and gives up
            lease = await fleet.acquire(example_env, "img", sample_id=f"s{index}")
            await lease.areset(seed=0)
            await lease.astep("true")
            await lease.release()
        with pytest.raises(DockerGoneError, match="every pool member is down"):
            await fleet.acquire(example_env, "img")


async def test_closing_the_fleet_removes_every_members_sandboxes() -> None:
    bus = EventBus()
    fleet, pools = _fleet(bus, LocalBackend(exec_limits=EXEC), LocalBackend(exec_limits=EXEC))
    async with fleet:
        fleet.prewarm(["a", "b"])
        for pool, image in zip(pools, ["a", "b"], strict=True):
            await pool.wait_warm(image)
        assert fleet.stats().warm == 2 and fleet.warm_count("a") == 1
        sandboxes = [sandbox for pool in pools for sandbox in pool._all]
        assert len(sandboxes) == 2 and all([await sandbox.is_alive() for sandbox in sandboxes])
    assert not any([await sandbox.is_alive() for sandbox in sandboxes])


def test_a_fleet_needs_members_with_unique_names() -> None:
    pool = _pool(LocalBackend(exec_limits=EXEC), EventBus())
    with pytest.raises(ValueError, match="unique names"):
        PoolFleet([FleetMember("a", pool), FleetMember("a", pool)])
    with pytest.raises(ValueError, match="unique names"):
        PoolFleet([])
