"""Lease warm sandboxes from the env pool: an episode of the example env in Docker.

Needs a running Docker engine (the base image is built offline on first use, about 40 s, as
root). Run it from the repository root: `.venv/bin/python examples/env_pool.py`
"""

import asyncio

from envs.example import FileCheckEnv
from harness import DockerBackend, EnvPool, PoolConfig, docker_client, ensure_base_image


async def main() -> None:
    client = docker_client()
    image = ensure_base_image(client)
    async with EnvPool(DockerBackend(client), PoolConfig(warm_per_image=4)) as pool:
        pool.prewarm([image])  # announce upcoming demand
        lease = await pool.acquire(FileCheckEnv, image, sample_id="s0", group_id="g0", priority=1)
        observation, info = await lease.areset(seed=0)  # returns before the container is ready
        await lease.astep(f"echo {info['word'][::-1]} > answer.txt")  # the task: the word reversed
        observation, reward, terminated, truncated, info = await lease.astep("submit")
        print(f"{observation} | reward {reward}, terminated: {terminated}, truncated: {truncated}")
        await lease.release()  # destroys the container, refills warm


if __name__ == "__main__":
    asyncio.run(main())
