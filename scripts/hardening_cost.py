"""What the sandbox hardening options cost: container start + first command, side by side.

    python scripts/hardening_cost.py [--rounds 10]

Starts a shipped task's image with the default limits, with `read_only_root` (the workdir and
/var/tmp become volumes seeded from the image) and with that plus a non-root `user`, in turns
(so machine noise hits all three alike), and prints each one's median and its ratio to the
default. Needs Docker; builds the task image if it is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from envs.swe import load_shipped_tasks
from envs.swe.runtime import swe_backend
from harness.backends import DockerBackend
from harness.sandbox import ContainerLimits
from harness.sandbox.docker import DockerSandbox

SETTINGS = {
    "default": ContainerLimits(),
    "read_only_root": ContainerLimits(read_only_root=True),
    "read_only_root + user 1000": ContainerLimits(read_only_root=True, user="1000:1000"),
}


async def main(rounds: int) -> None:
    runtime = swe_backend("docker")
    assert isinstance(runtime.backend, DockerBackend)
    client = runtime.backend.client
    image = await runtime.ensure_image(load_shipped_tasks()[0])
    seconds: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for _ in range(rounds):
        for name, limits in SETTINGS.items():
            started = time.monotonic()
            sandbox = await DockerSandbox.create(client, image, limits=limits)
            await sandbox.exec("true", timeout_s=30)
            seconds[name].append(time.monotonic() - started)
            await sandbox.aclose()
    base = statistics.median(seconds["default"])
    print(f"container start + first command, median of {rounds} (image {image}):")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"  {name:28s} {median * 1000:6.0f} ms   {median / base:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="starts per setting")
    asyncio.run(main(parser.parse_args().rounds))
