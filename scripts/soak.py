"""Soak: N Docker sandboxes at once for M minutes, churned; resources at start and end.

    python scripts/soak.py [--containers 64] [--minutes 10] [--churn 20]
    python scripts/soak.py --run [--minutes 60] [--sample-s 60] [--trace-memory]

With `--run`, the soak is a whole `conductor run` (configs/run/default.yaml: scripted agents on
the simulated engine, real Docker sandboxes, grading, weight updates) kept going for M minutes
in this process, then stopped as SIGTERM stops it. Every `--sample-s` it samples this process's
RSS, file descriptors and threads, the project's containers, and the event loop's lag (the
longest delay of a 10 ms ticker since the last sample, and the run's `loop_stall` events);
`--trace-memory` adds the allocation sites that grew most between the first sample after
warm-up and the last (tracemalloc: slower, for finding a leak).

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
import contextlib
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


async def soak_run(args: argparse.Namespace) -> None:
    """A `conductor run` for `args.minutes`, sampled every `args.sample_s`."""
    import tempfile
    import tracemalloc

    from harness.events import Phase
    from rollout.cli.run import DEFAULT_RUN_CONFIG
    from rollout.jobs.run_job import run_job
    from rollout.jobs.run_plan import plan_run

    client = docker.from_env(timeout=120)
    plan = plan_run(
        DEFAULT_RUN_CONFIG,
        ["steps=1000000", "groups_per_step=2", "group_size=4", *args.override],
    )
    if args.trace_memory:
        tracemalloc.start(args.trace_frames)
    lag = [0.0]

    async def ticker() -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(0.01)
            now = loop.time()
            lag[0] = max(lag[0], now - last - 0.01)
            last = now

    rows: list[tuple[float, dict]] = []
    snapshots: list[tracemalloc.Snapshot] = []
    with tempfile.TemporaryDirectory(prefix="soak-run-") as out:
        run_dir = Path(out) / "run"

        def stalls() -> int:
            events = run_dir / "events.jsonl"
            if not events.exists():
                return 0
            with events.open("rb") as handle:
                return sum(1 for line in handle if Phase.LOOP_STALL.value.encode() in line)

        async def sampler(started: float) -> None:
            while True:
                await asyncio.sleep(args.sample_s)
                row = await asyncio.to_thread(resources, client)
                row["max_lag_ms"] = round(1000 * lag[0])
                row["loop_stalls"] = await asyncio.to_thread(stalls)
                lag[0] = 0.0
                rows.append((time.monotonic() - started, row))
                if args.trace_memory and len(rows) in (
                    2,
                    2 + int(args.minutes * 60 / args.sample_s) - 3,
                ):
                    snapshots.append(tracemalloc.take_snapshot())
                print(f"{(time.monotonic() - started) / 60:5.1f} min {row}", flush=True)

        started = time.monotonic()
        rollout = asyncio.create_task(  # as `conductor run` keeps them: step outlines only
            run_job(plan, run_dir, keep_batches=False)
        )
        background = [asyncio.create_task(ticker()), asyncio.create_task(sampler(started))]
        done, _ = await asyncio.wait({rollout}, timeout=args.minutes * 60)
        for task in background:
            task.cancel()
        if not done:
            rollout.cancel()  # as SIGTERM stops a run: generations aborted, containers removed
        with contextlib.suppress(asyncio.CancelledError):
            await rollout
        steps = (run_dir / "steps.jsonl").read_text().count("\n")
    elapsed = time.monotonic() - started
    keys = list(rows[0][1]) if rows else []
    print(f"\nsoak (run): {elapsed / 60:.1f} min, {steps} training steps")
    print("| t (min) | " + " | ".join(keys) + " |")
    print("|---:|" + "---:|" * len(keys))
    for t_s, row in rows:
        print(f"| {t_s / 60:.1f} | " + " | ".join(str(row[key]) for key in keys) + " |")
    print(f"project containers after the run: {resources(client)['containers']}")
    if len(snapshots) == 2:
        print("\nallocation sites that grew most (first sample after warm-up -> last):")
        for stat in snapshots[1].compare_to(snapshots[0], "traceback")[:12]:
            print(f"  {stat.size_diff / 1024:+9.0f} KiB {stat.count_diff:+8d} blocks")
            for line in stat.traceback.format(most_recent_first=True)[: 2 * args.show_frames]:
                print(f"      {line}")


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
    parser.add_argument("--run", action="store_true", help="soak a whole `conductor run`")
    parser.add_argument("--trace-memory", action="store_true", help="with --run: tracemalloc")
    parser.add_argument(
        "--trace-frames", type=int, default=30, help="frames kept per traced allocation"
    )
    parser.add_argument("--show-frames", type=int, default=12, help="frames shown per site")
    parser.add_argument(
        "--override", action="append", default=[], help="with --run: a key=value of the run"
    )
    args = parser.parse_args()
    if args.run:
        await soak_run(args)
        return
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
