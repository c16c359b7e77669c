"""`conductor bench env`: env-pool and sandbox overheads, side by side in one run.

Reports (1) cold vs warm acquire latency (acquire until the sandbox can run a command),
(2) the per-action overhead of `DockerSandbox.exec` over a raw `docker exec` of the same
command, and (3) actions per second with 1, 8 and 32 concurrent envs. Ratios matter more than
absolute figures on a shared, noisy machine.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import docker

from harness.backends import DockerBackend
from harness.env import AgentEnv, ResetReturn, StepReturn
from harness.fleet.protocol import Lease
from harness.handle import SandboxHandle
from harness.pool import EnvPool, PoolConfig
from harness.sandbox.docker import DockerSandbox
from harness.sandbox.limits import ContainerLimits

__all__ = [
    "EnvBenchConfig",
    "EnvBenchResult",
    "ShellEnv",
    "drive_actions",
    "percentile",
    "run_env_bench",
    "timed",
]


@dataclass(frozen=True, slots=True)
class EnvBenchConfig:
    acquires: int = 20
    exec_repeats: int = 30
    concurrency_levels: tuple[int, ...] = (1, 8, 32)
    actions_per_env: int = 10
    command: str = "true"


@dataclass(slots=True)
class EnvBenchResult:
    cold_acquire_s: list[float] = field(default_factory=list)
    warm_acquire_s: list[float] = field(default_factory=list)
    raw_exec_s: list[float] = field(default_factory=list)
    sandbox_exec_s: list[float] = field(default_factory=list)
    actions_per_s: dict[int, float] = field(default_factory=dict)


class ShellEnv(AgentEnv):
    """Runs each action as a command; the least env possible, to measure the pool itself."""

    def __init__(self, sandbox: SandboxHandle) -> None:
        super().__init__()
        self._sandbox = sandbox

    async def _areset(self, seed: int | None, options: dict[str, object] | None) -> ResetReturn:
        return "", {}

    async def _astep(self, action: str) -> StepReturn:
        result = await (await self._sandbox.get()).exec(action, timeout_s=30)
        return result.output, 0.0, False, False, {}


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


async def timed(operation: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await operation()
    return time.perf_counter() - started


async def run_env_bench(
    client: docker.DockerClient,
    image: str,
    config: EnvBenchConfig,
    progress: Callable[[str], None] = print,
) -> EnvBenchResult:
    result = EnvBenchResult()
    backend = DockerBackend(client, limits=ContainerLimits(memory_mb=512))

    progress(f"cold acquire x{config.acquires}")
    async with EnvPool(backend, PoolConfig(warm_per_image=0, max_live=8)) as pool:
        for _ in range(config.acquires):
            lease = await pool.acquire(ShellEnv, image)
            result.cold_acquire_s.append(await timed(lease.handle.get))
            await lease.release()

    progress(f"warm acquire x{config.acquires}")
    async with EnvPool(backend, PoolConfig(warm_per_image=2, max_live=8)) as pool:
        for _ in range(config.acquires):
            await pool.wait_warm(image)
            started = time.perf_counter()
            lease = await pool.acquire(ShellEnv, image)
            await lease.handle.get()
            result.warm_acquire_s.append(time.perf_counter() - started)
            await lease.release()

    progress(f"exec overhead x{config.exec_repeats}")
    sandbox = await DockerSandbox.create(client, image, limits=ContainerLimits(memory_mb=512))
    try:
        raw = ["docker", "exec", sandbox.container_id, "bash", "-c", config.command]
        for _ in range(config.exec_repeats):
            result.raw_exec_s.append(await timed(lambda: _run_quietly(raw)))
            result.sandbox_exec_s.append(
                await timed(lambda: sandbox.exec(config.command, timeout_s=30))
            )
    finally:
        await sandbox.aclose()

    for envs in config.concurrency_levels:
        progress(f"throughput with {envs} concurrent envs")
        pool_config = PoolConfig(warm_per_image=envs, max_live=envs, act_slots=envs)
        async with EnvPool(backend, pool_config) as pool:
            await pool.wait_warm(image, envs)
            leases = [await pool.acquire(ShellEnv, image) for _ in range(envs)]
            for lease in leases:
                await lease.areset()
            elapsed = await timed(
                lambda: asyncio.gather(*(drive_actions(lease, config) for lease in leases))  # noqa: B023
            )
            result.actions_per_s[envs] = envs * config.actions_per_env / elapsed
            for lease in leases:
                await lease.release()
    return result


async def drive_actions(lease: Lease, config: EnvBenchConfig) -> None:
    """Step `lease` `actions_per_env` times with the benchmark's command."""
    for _ in range(config.actions_per_env):
        await lease.astep(config.command)


async def _run_quietly(argv: list[str]) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    if await process.wait() != 0:
        raise RuntimeError(f"{' '.join(argv)} failed")


def summarize(result: EnvBenchResult) -> list[tuple[str, str, str, str]]:
    """Rows (measure, p50, p99, note) for printing."""

    def ms(values: Sequence[float], fraction: float) -> str:
        seconds = percentile(values, fraction)
        return f"{1e6 * seconds:.0f} µs" if seconds < 1e-3 else f"{1e3 * seconds:.1f} ms"

    cold50 = percentile(result.cold_acquire_s, 0.5)
    warm50 = percentile(result.warm_acquire_s, 0.5)
    raw50 = statistics.median(result.raw_exec_s)
    ours50 = statistics.median(result.sandbox_exec_s)
    rows = [
        ("cold acquire", ms(result.cold_acquire_s, 0.5), ms(result.cold_acquire_s, 0.99), ""),
        ("warm acquire", ms(result.warm_acquire_s, 0.5), ms(result.warm_acquire_s, 0.99),
         f"cold/warm p50 = {cold50 / max(warm50, 1e-9):.0f}x"),
        ("raw `docker exec` (CLI)", ms(result.raw_exec_s, 0.5), ms(result.raw_exec_s, 0.99), ""),
        ("DockerSandbox.exec", ms(result.sandbox_exec_s, 0.5), ms(result.sandbox_exec_s, 0.99),
         f"ours/raw p50 = {ours50 / raw50:.2f}x ({1000 * (ours50 - raw50):+.1f} ms)"),
    ]  # fmt: skip
    for envs, rate in result.actions_per_s.items():
        rows.append((f"actions/s, {envs} concurrent envs", f"{rate:.1f}", "", ""))
    return rows
