"""The editor attack of issue 28, measured: three samples edit a 10 MB file, the others work.

    python scripts/editor_attack.py [--attackers 3] [--workers 5] [--mb 10] [--seconds 60]

Every sample has its own Docker sandbox and the SWE tools (`ToolBox`, as the env runs them),
all on one event loop. Workers run `wc -l` on a small file again and again and time each step.
Attackers each create a `--mb` MB file of `x = 1` lines, then call `str_replace_editor
str_replace` with `old_str="x"` (a match on every line: issue 28 measured 11 s per call at
1 MB on the loop's only thread, and 41.7 s for every other sample's step while three samples
did it), then `view` and `insert`, in a loop. The script reports the workers' median and p90
step latency without attackers (baseline) and with them, and their ratio.

Then it starts the same attack in a child process under `conductor run`'s signal handling
(`run_until_signal`), sends SIGTERM once the attackers are at work, and reports how long the
child took to exit, its exit code and the project containers it left.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import docker  # noqa: E402

from envs.swe.actions import ParsedAction  # noqa: E402
from envs.swe.config import ToolsConfig  # noqa: E402
from envs.swe.tools import ToolBox  # noqa: E402
from foundation.clock import LoopClock  # noqa: E402
from harness.images import ensure_base_image  # noqa: E402
from harness.sandbox import ContainerLimits  # noqa: E402
from harness.sandbox.docker import DockerSandbox, docker_client  # noqa: E402
from harness.sandbox.labels import _PID, MANAGED_LABEL  # noqa: E402

BIG = "/testbed/huge.py"


def _bash(command: str) -> ParsedAction:
    return ParsedAction("bash", {"command": command})


def _edit(**arguments: object) -> ParsedAction:
    return ParsedAction("str_replace_editor", arguments)


async def _sandbox(client: docker.DockerClient, image: str) -> DockerSandbox:
    return await DockerSandbox.create(
        client, image, limits=ContainerLimits(memory_mb=512, cpus=0.5, pids=64)
    )


async def worker(tools: ToolBox, until: float, latencies: list[float]) -> None:
    await tools.run(_bash("seq 1 1000 > /testbed/small.txt"))
    while time.monotonic() < until:
        started = time.monotonic()
        outcome = await tools.run(_bash("wc -l /testbed/small.txt"))
        latencies.append(time.monotonic() - started)
        assert outcome.output.strip().startswith("1000"), outcome.output


async def attacker(tools: ToolBox, until: float, megabytes: int, calls: list[float]) -> None:
    lines = megabytes * 1024 * 1024 // 6
    made = await tools.run(
        _bash(f"python3 -c \"open('{BIG}','w').write('x = 1\\n' * {lines} + 'tail\\n')\"")
    )
    assert made.exit_code == 0, made.output
    actions = [
        _edit(command="str_replace", path=BIG, old_str="x", new_str="y"),  # 1.7 M matches
        _edit(command="view", path=BIG),
        _edit(command="insert", path=BIG, insert_line=lines - 10, new_str="inserted"),
        _edit(command="str_replace", path=BIG, old_str="inserted\n", new_str=""),
    ]
    index = 0
    while time.monotonic() < until:
        started = time.monotonic()
        await tools.run(actions[index % len(actions)])
        calls.append(time.monotonic() - started)
        index += 1


async def phase(
    client: docker.DockerClient, image: str, workers: int, attackers: int, args: argparse.Namespace
) -> tuple[list[float], list[float]]:
    """Workers' step latencies and attackers' call times over `args.seconds`."""
    boxes = [await _sandbox(client, image) for _ in range(workers + attackers)]
    clock, config = LoopClock(), ToolsConfig()
    latencies: list[float] = []
    calls: list[float] = []
    lags: list[float] = []
    until = time.monotonic() + args.seconds

    async def ticker() -> None:  # the event loop's lag: how late a 10 ms sleep wakes
        while time.monotonic() < until:
            started = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - started - 0.01)

    try:
        await asyncio.gather(
            ticker(),
            *(
                worker(ToolBox(box, config, clock=clock), until, latencies)
                for box in boxes[:workers]
            ),
            *(
                attacker(ToolBox(box, config, clock=clock), until, args.mb, calls)
                for box in boxes[workers:]
            ),
        )
    finally:
        await asyncio.gather(*(box.aclose() for box in boxes))
    lags.sort()
    print(
        f"loop lag, {attackers} attackers: p50 {1000 * lags[len(lags) // 2]:.0f} ms, "
        f"p99 {1000 * lags[int(0.99 * (len(lags) - 1))]:.0f} ms, max {1000 * lags[-1]:.0f} ms",
        flush=True,
    )
    return latencies, calls


def _summary(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    median = statistics.median(ordered)
    return f"median {1000 * median:.0f} ms, p90 {1000 * p90:.0f} ms, n={len(ordered)}"


def child(args: argparse.Namespace) -> None:
    """The attack under `conductor run`'s signal handling (SIGTERM stops it)."""
    from rollout.cli.shutdown import Interrupted, run_until_signal

    client = docker_client()
    image = ensure_base_image(client, progress=lambda line: None)
    args.seconds = 600

    async def main() -> None:
        print("attacking", flush=True)
        await phase(client, image, args.workers, args.attackers, args)

    try:
        run_until_signal(main, lambda signum: print("stopping", flush=True))
    except Interrupted as stopped:
        sys.exit(stopped.exit_code)


def sigterm_trial(args: argparse.Namespace) -> None:
    command = [
        sys.executable, __file__, "--child", "--workers", str(args.workers),
        "--attackers", str(args.attackers), "--mb", str(args.mb),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "attacking"
    time.sleep(args.sigterm_after_s)  # the attackers have made their files and are editing
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    took = time.monotonic() - sent
    client = docker.from_env()
    records = client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
    left = sum(1 for r in records if (r.get("Labels") or {}).get(_PID) == str(process.pid))
    print(
        f"SIGTERM during the attack: exit {process.returncode} after {took:.1f} s; "
        f"containers of the run left: {left}"
    )
    if process.returncode != 128 + signal.SIGTERM:
        print(output[-3000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attackers", type=int, default=3)
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sigterm-after-s", type=float, default=20.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    client = docker_client()
    image = ensure_base_image(client, progress=lambda line: None)
    baseline, _ = asyncio.run(phase(client, image, args.workers, 0, args))
    attacked, calls = asyncio.run(phase(client, image, args.workers, args.attackers, args))
    ratio = statistics.median(attacked) / statistics.median(baseline)
    print(f"workers' steps, no attackers:   {_summary(baseline)}")
    print(f"workers' steps, {args.attackers} attackers:  {_summary(attacked)}")
    print(f"attackers' editor calls ({args.mb} MB file): {_summary(calls)}")
    print(f"median step latency with attackers / without: {ratio:.2f}x")
    sigterm_trial(args)


if __name__ == "__main__":
    main()
