"""Start-up races on one shared Docker daemon: many runs start at once while containers churn.

    python scripts/start_race.py [--starts 50] [--concurrency 10] [--churners 2]
    python scripts/start_race.py --mode run --starts 6 --concurrency 3

Each *start* is a separate process doing what a run's start does on Docker: the env pool's
start-up reaper, then two leased sandboxes (one command each), then the pool's close. With
`--mode run`, each start is a real `conductor run steps=1`, and every other one is killed
(SIGKILL) once its containers are up and then resumed with `--resume`. Meanwhile *churners*
create project containers owned by dead processes (for every reaper to race on) and remove
containers themselves. A start crashes when it exits non-zero or prints a traceback; the
script prints each crash's last lines and the count. Needs Docker and the base image.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.images import ensure_base_image  # noqa: E402
from harness.sandbox.docker_removal import remove_container_blocking  # noqa: E402
from harness.sandbox.labels import _PID, MANAGED_LABEL, owner_labels  # noqa: E402

_POOL_START = """
import asyncio, sys
from harness.backends import DockerBackend
from harness.pool import EnvPool, PoolConfig
from harness.sandbox import ContainerLimits
from harness.sandbox.docker import docker_client
from harness.handle import SandboxHandle

class Probe:
    def __init__(self, handle: SandboxHandle) -> None:
        self.handle = handle

    async def aclose(self) -> None:
        pass

async def main(image: str) -> None:
    limits = ContainerLimits(memory_mb=128, cpus=0.25, pids=64)
    backend = DockerBackend(docker_client(), limits=limits)
    config = PoolConfig(backend="docker", warm_per_image=1, max_live=3, start_concurrency=2)
    async with EnvPool(backend, config) as pool:
        handles = []
        for _ in range(2):
            lease = await pool.acquire(Probe, image)
            handles.append(lease)
        for lease in handles:
            sandbox = await lease.handle.get()
            result = await sandbox.exec("echo ok", timeout_s=30)
            assert result.output.strip() == "ok", result
        for lease in handles:
            await lease.release()

asyncio.run(main(sys.argv[1]))
"""


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def churn(
    client: docker.DockerClient,
    image: str,
    stop: threading.Event,
    counts: list[int],
    pids: list[int],
) -> None:
    """Create containers of dead owners (every reaper races for them) and remove some itself."""
    dead = _dead_pid()
    pids.append(dead)
    labels = {**owner_labels(time.time(), 3600), _PID: str(dead)}
    made: list[str] = []
    while not stop.is_set():
        try:
            container = client.containers.create(
                image, command=["sleep", "60"], labels=labels, network_mode="none"
            )
            made.append(str(container.id))
            counts[0] += 1
            if len(made) >= 3:
                remove_container_blocking(client, made.pop(0))
        except docker.errors.DockerException:
            pass  # churn is best effort: another reaper got there first
        time.sleep(0.05)
    for container_id in made:
        remove_container_blocking(client, container_id)


def pool_start(image: str, pids: list[int]) -> tuple[int, str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _POOL_START, image],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    pids.append(process.pid)
    output, _ = process.communicate(timeout=600)
    return process.returncode, output


def _containers_of(client: docker.DockerClient, pid: int) -> int:
    records = client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
    return sum(1 for r in records if (r.get("Labels") or {}).get(_PID) == str(pid))


def run_start(
    index: int, out: Path, client: docker.DockerClient, pids: list[int]
) -> tuple[int, str]:
    """A real `conductor run steps=1`; odd-numbered ones are killed mid-run and resumed."""
    base = [sys.executable, "-m", "rollout.cli", "run"]
    args = [
        "steps=1", "groups_per_step=1", "group_size=2",
        "pool.overrides=[backend=docker, warm_per_image=1, max_live=4, act_slots=2]",
        "--out", str(out / str(index)), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    process = subprocess.Popen(
        base + args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    pids.append(process.pid)
    if index % 2 == 0:
        output, _ = process.communicate(timeout=900)
        return process.returncode, output
    deadline = time.monotonic() + 300
    while _containers_of(client, process.pid) < 1 and process.poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    time.sleep(2)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    output, _ = process.communicate()
    if process.returncode not in (0, -signal.SIGKILL):
        return process.returncode, output
    [run_dir] = list((out / str(index)).iterdir())
    resumed = subprocess.Popen(
        [*base, "--resume", str(run_dir)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    pids.append(resumed.pid)
    output, _ = resumed.communicate(timeout=900)
    return resumed.returncode, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=10, help="starts at the same time")
    parser.add_argument("--churners", type=int, default=2, help="threads churning containers")
    parser.add_argument("--mode", choices=("pool", "run"), default="pool")
    args = parser.parse_args()
    client = docker.from_env(timeout=120)
    image = ensure_base_image(client, progress=lambda line: None)
    stop, churned, pids = threading.Event(), [0], []
    churners = [
        threading.Thread(target=churn, args=(client, image, stop, churned, pids), daemon=True)
        for _ in range(args.churners)
    ]
    for thread in churners:
        thread.start()
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="start-race-") as scratch,
        ThreadPoolExecutor(args.concurrency) as executor,
    ):
        if args.mode == "pool":
            futures = [executor.submit(pool_start, image, pids) for _ in range(args.starts)]
        else:
            futures = [
                executor.submit(run_start, index, Path(scratch), client, pids)
                for index in range(args.starts)
            ]
        outcomes = [future.result() for future in futures]
    stop.set()
    for thread in churners:
        thread.join()
    elapsed = time.monotonic() - started
    crashes = [(code, output) for code, output in outcomes if code != 0 or "Traceback" in output]
    for code, output in crashes:
        print(f"--- exit {code}:\n" + "\n".join(output.strip().splitlines()[-8:]))
    records = client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
    ours = {str(pid) for pid in pids}  # the daemon is shared: count only this race's
    left = [r for r in records if (r.get("Labels") or {}).get(_PID) in ours]
    print(
        f"start race ({args.mode}): {args.starts} starts, {args.concurrency} at a time, "
        f"{args.churners} churners ({churned[0]} containers churned) in {elapsed:.0f} s: "
        f"{len(crashes)} crashed; containers of the race left: {len(left)}"
    )


if __name__ == "__main__":
    main()
