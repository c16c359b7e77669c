"""Soak: N Docker sandboxes at once for M minutes, churned; resources at start and end.

    python scripts/soak.py [--containers 64] [--minutes 10] [--churn 20]

Resources are also sampled every `--sample-s` while the workers run: connection pools and
worker threads fill up in the first minute and level off; a leak keeps climbing.

Each of N workers keeps one sandbox, runs short commands in it (a file write and read, a
`python3 -c`), and replaces the sandbox every `--churn` commands (remove and create). Reports
this process's open file descriptors, threads and RSS, and the project's containers, with N
sandboxes up at the start and again with N up at the end, so growth beyond noise shows; then
the containers left after the last close (0). Needs Docker and the base image
(`conductor images build`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import docker

from harness.images import ensure_base_image
from harness.sandbox import ContainerLimits, ExecLimits
from harness.sandbox.docker import DockerSandbox
from harness.sandbox.labels import MANAGED_LABEL


def resources(client: docker.DockerClient) -> dict[str, int]:
    status = Path("/proc/self/status").read_text().splitlines()
    field = {
        name: value.split()[0]
        for name, _, value in (line.partition(":") for line in status)
        if value.split()
    }
    containers = client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
    kinds = [_fd_kind(name) for name in os.listdir("/proc/self/fd")]
    return {
        "fds": len(kinds),
        "sockets": kinds.count("socket"),
        "threads": int(field["Threads"]),
        "rss_mb": int(field["VmRSS"]) // 1024,
        "containers": len(containers),
    }


def _fd_kind(name: str) -> str:
    try:
        target = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        return "gone"
    return "socket" if target.startswith("socket:") else "other"


async def sample_every(
    client: docker.DockerClient, period_s: float, until: float, rows: list[tuple[float, dict]]
) -> None:
    """Resources every `period_s` while the workers run: a pool that fills up levels off, a
    leak keeps climbing."""
    started = time.monotonic()
    while time.monotonic() + period_s < until:
        await asyncio.sleep(period_s)
        rows.append((time.monotonic() - started, await asyncio.to_thread(resources, client)))


async def worker(
    client: docker.DockerClient, image: str, until: float, churn: int, counts: list[int]
) -> None:
    limits = ContainerLimits(memory_mb=128, pids=64, cpus=0.25)
    execs = ExecLimits(kill_grace_s=1, host_grace_s=5)
    while time.monotonic() < until:
        sandbox = await DockerSandbox.create(client, image, limits=limits, exec_limits=execs)
        try:
            for index in range(churn):
                if time.monotonic() >= until:
                    break
                await sandbox.write_file(f"note-{index}.txt", b"x" * 1024)
                await sandbox.read_file(f"note-{index}.txt")
                await sandbox.exec("python3 -c 'print(sum(range(10000)))'", timeout_s=30)
                counts[0] += 3
        finally:
            await sandbox.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--containers", type=int, default=64)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument(
        "--churn", type=int, default=20, help="commands before a sandbox is replaced"
    )
    parser.add_argument(
        "--sample-s", type=float, default=60.0, help="seconds between resource samples"
    )
    args = parser.parse_args()
    client = docker.from_env(timeout=120)
    image = ensure_base_image(client, progress=lambda line: None)
    warm = [await DockerSandbox.create(client, image) for _ in range(args.containers)]
    start = resources(client)
    for sandbox in warm:
        await sandbox.aclose()
    counts = [0]
    started = time.monotonic()
    until = started + args.minutes * 60
    samples: list[tuple[float, dict]] = []
    await asyncio.gather(
        sample_every(client, args.sample_s, until, samples),
        *(worker(client, image, until, args.churn, counts) for _ in range(args.containers)),
    )
    elapsed = time.monotonic() - started
    again = [await DockerSandbox.create(client, image) for _ in range(args.containers)]
    end = resources(client)  # the same state as at the start: N sandboxes up
    for sandbox in again:
        await sandbox.aclose()
    left = resources(client)["containers"]
    print(
        f"soak: {args.containers} sandboxes for {elapsed / 60:.1f} min, {counts[0]} operations "
        f"({counts[0] / elapsed:.0f}/s), churn every {args.churn} commands"
    )
    print(f"| resource | start ({args.containers} up) | end ({args.containers} up again) |")
    print("|---|---:|---:|")
    for key in start:
        print(f"| {key} | {start[key]} | {end[key]} |")
    print(f"project containers after the last close: {left}")
    print("\nwhile the workers ran:\n")
    print("| t (min) | " + " | ".join(start) + " |")
    print("|---:|" + "---:|" * len(start))
    for t_s, row in samples:
        print(f"| {t_s / 60:.1f} | " + " | ".join(str(row[key]) for key in start) + " |")


if __name__ == "__main__":
    asyncio.run(main())
