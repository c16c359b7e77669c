"""The env benchmark runs end to end (tiny sizes; its figures are not asserted)."""

from __future__ import annotations

import docker
import pytest

from harness.bench import EnvBenchConfig, run_env_bench, summarize

pytestmark = pytest.mark.docker


async def test_env_bench_produces_every_row(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    config = EnvBenchConfig(
        acquires=2, exec_repeats=2, concurrency_levels=(1, 2), actions_per_env=2
    )
    result = await run_env_bench(docker_client, base_image, config, progress=lambda line: None)
    measures = [row[0] for row in summarize(result)]
    assert measures[:4] == [
        "cold acquire",
        "warm acquire",
        "raw `docker exec` (CLI)",
        "DockerSandbox.exec",
    ]
    assert set(result.actions_per_s) == {1, 2} and all(
        rate > 0 for rate in result.actions_per_s.values()
    )
