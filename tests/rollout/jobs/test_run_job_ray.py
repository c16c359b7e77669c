"""`conductor run` with env workers on a real local Ray cluster (a head and one more node on this
machine) and real Docker: episodes run and are graded on both nodes' workers."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import docker
import pytest

from foundation.config import load_config
from harness.sandbox.labels import MANAGED_LABEL, parse_owner
from rollout.jobs.config import RunConfig
from rollout.jobs.run_job import run_job
from rollout.jobs.run_plan import plan_run_config
from tests.paths import CONFIGS
from tests.ray_cluster import local_ray_cluster

pytestmark = pytest.mark.ray

RUN_CONFIG = CONFIGS / "run" / "default.yaml"
TASKS = [
    "swe-taskset__spans-remove-drops-right-part",
    "swe-taskset__inikit-parse-error-line-number",
]


async def _watch_owners(client: docker.DockerClient, owners: set[int]) -> None:
    """Collect the owner pids of this project's containers until cancelled."""
    while True:
        containers = await asyncio.to_thread(
            client.containers.list, all=True, filters={"label": MANAGED_LABEL}
        )
        for container in containers:
            owner = parse_owner(container.labels)
            if owner is not None:
                owners.add(owner.pid)
        await asyncio.sleep(0.3)


@pytest.mark.docker
@pytest.mark.slow
async def test_a_run_on_ray_env_workers_runs_and_grades_episodes_on_both_nodes(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    owners: set[int] = set()
    with local_ray_cluster():
        config = load_config(
            RunConfig,
            RUN_CONFIG,
            [
                "ray={path: ../pool/ray.yaml, overrides: [refresh_s=0.2, actor_num_cpus=0.5]}",
                "steps=1",
                "groups_per_step=2",
                "group_size=2",
                "async_factor=1",
                f"task_ids=[{','.join(TASKS)}]",
                "pool.overrides=[backend=docker, warm_per_image=1, max_live=4, act_slots=2]",
                "model.overrides=[cost.t_weights_s=0.0005]",
                "scripted.fix_probability=0.5",
                "trainer.train_time_s=0.1",
                "seed=3",
            ],
        )
        watcher = asyncio.create_task(_watch_owners(docker_client, owners))
        try:
            result = await run_job(plan_run_config(config, RUN_CONFIG.parent), tmp_path / "run")
        finally:
            watcher.cancel()
    trajectories = [t for batch in result.batches for t in batch.trajectories]
    assert len(trajectories) == 4 and all(t.infra_error is None for t in trajectories)
    assert all(t.reward in (0.0, 1.0) for t in trajectories)
    workers = owners - {os.getpid()}
    assert len(workers) >= 2, f"containers of both nodes' workers, got owners {owners}"
    assert os.getpid() not in owners, "no sandbox, not even a grading one, ran in the conductor"
    # The listing's own labels: no inspect that races with other processes' removals.
    left = docker_client.api.containers(all=True, filters={"label": MANAGED_LABEL})
    assert [r for r in left if (o := parse_owner(r.get("Labels") or {})) and o.pid in workers] == []
