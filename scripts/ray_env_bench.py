"""The cost of the Ray hop: actions per second through a Ray env worker vs the local env pool.

    python scripts/ray_env_bench.py [--levels 1 8 32] [--actions-per-env 10] [--repeats 3]

Same machine, same Docker engine, same env (`harness.bench`'s shell env) and command (`true`),
same pool limits (warm_per_image = max_live = act_slots = the number of envs): once through an
`EnvPool` in this process, once through `ray_fleet` (one `EnvWorker` actor on a one-node Ray
instance started here, or the cluster at `--address`), in turns at each level so that machine
noise hits both alike. Prints the median actions/s of each, their ratio and, at one env, the
time the hop adds to each action. Needs Docker; builds the base image if it is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from foundation.clock import LoopClock
from harness.backends import DockerBackend
from harness.bench import EnvBenchConfig, ShellEnv, drive_actions, percentile, timed
from harness.events import EventBus
from harness.fleet import LeasePool, RayPoolConfig, ray_fleet
from harness.fleet.ray_config import require_ray
from harness.images import ensure_base_image
from harness.pool import EnvPool, PoolConfig
from harness.sandbox import ContainerLimits
from harness.sandbox.docker import docker_client

ROUND_TRIPS = 20  # empty calls timed per fleet


def _pool_config(envs: int) -> PoolConfig:
    return PoolConfig(
        backend="docker",
        warm_per_image=envs,
        max_live=envs,
        act_slots=envs,
        container=ContainerLimits(memory_mb=512),
    )


async def _actions_per_s(pool: LeasePool, image: str, envs: int, config: EnvBenchConfig) -> float:
    """`envs` leases on warm sandboxes, each acting `actions_per_env` times, all at once."""
    leases = [await pool.acquire(ShellEnv, image) for _ in range(envs)]
    try:
        for lease in leases:
            await lease.areset()
            await lease.astep(config.command)  # the sandbox is there (not timed)
        elapsed_s = await timed(
            lambda: asyncio.gather(*(drive_actions(lease, config) for lease in leases))  # type: ignore[arg-type]
        )
    finally:
        for lease in leases:
            await lease.release()
    return envs * config.actions_per_env / elapsed_s


async def _local(image: str, envs: int, config: EnvBenchConfig) -> float:
    backend = DockerBackend(docker_client(), limits=ContainerLimits(memory_mb=512))
    async with EnvPool(backend, _pool_config(envs)) as pool:
        await pool.wait_warm(image, envs)
        return await _actions_per_s(pool, image, envs, config)


async def _through_ray(
    image: str, envs: int, config: EnvBenchConfig, ray: RayPoolConfig, round_trips_s: list[float]
) -> float:
    """Actions/s through the Ray fleet; adds the times of empty calls to `round_trips_s`."""
    async with ray_fleet(_pool_config(envs), ray, bus=EventBus(), clock=LoopClock()) as fleet:
        for member in fleet.members:
            await member.wait_warm(image, envs)
            for _ in range(ROUND_TRIPS):  # the hop alone: a call that does nothing on the worker
                round_trips_s.append(await timed(member.actor.view.remote))
        return await _actions_per_s(fleet, image, envs, config)


async def run(
    image: str,
    levels: Sequence[int],
    config: EnvBenchConfig,
    ray: RayPoolConfig,
    repeats: int,
    progress: Callable[[str], None],
    round_trips_s: list[float],
) -> list[tuple[int, float, float]]:
    """(envs, local actions/s, Ray actions/s) per level, each the median of `repeats`."""
    rows = []
    for envs in levels:
        local: list[float] = []
        remote: list[float] = []
        for round_index in range(repeats):
            progress(f"{envs} envs, round {round_index + 1}/{repeats}")
            local.append(await _local(image, envs, config))
            remote.append(await _through_ray(image, envs, config, ray, round_trips_s))
        rows.append((envs, statistics.median(local), statistics.median(remote)))
    return rows


def table(rows: Sequence[tuple[int, float, float]], round_trips_s: Sequence[float]) -> str:
    lines = [
        f"{'envs':>5}  {'local pool act/s':>17}  {'Ray worker act/s':>17}  {'Ray/local':>9}",
    ]
    for envs, local, remote in rows:
        lines.append(f"{envs:>5}  {local:>17.1f}  {remote:>17.1f}  {remote / local:>9.2f}")
    single = [(local, remote) for envs, local, remote in rows if envs == 1]
    if single:
        local, remote = single[0]
        added_ms = 1000 * (1 / remote - 1 / local)
        lines.append(f"the hop adds {added_ms:+.2f} ms to each action at 1 env")
    if round_trips_s:
        p50_ms = 1000 * percentile(round_trips_s, 0.5)
        p99_ms = 1000 * percentile(round_trips_s, 0.99)
        lines.append(f"an empty Ray call (worker view): p50 {p50_ms:.2f} ms, p99 {p99_ms:.2f} ms")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--actions-per-env", type=int, default=10)
    parser.add_argument("--command", default="true", help="the action each step runs")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per level (median)")
    parser.add_argument("--image", default=None, help="default: the project's base image")
    parser.add_argument(
        "--address",
        default=None,
        help="a running Ray cluster (host:port or auto); default: start a one-node instance",
    )
    parser.add_argument(
        "--num-cpus", type=int, default=2, help="CPUs of the one-node instance started here"
    )
    args = parser.parse_args(argv)
    ray_module: Any = require_ray()
    if args.address is None:
        ray_module.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    else:
        ray_module.init(address=args.address, log_to_driver=False)
    try:
        client = docker_client()
        image = args.image or ensure_base_image(client, progress=print)
        client.close()
        config = EnvBenchConfig(actions_per_env=args.actions_per_env, command=args.command)
        ray = RayPoolConfig(actor_num_cpus=0)
        round_trips_s: list[float] = []
        rows = asyncio.run(run(image, args.levels, config, ray, args.repeats, print, round_trips_s))
    finally:
        ray_module.shutdown()
    print(table(rows, round_trips_s))


if __name__ == "__main__":
    main()
