"""A Docker daemon restarted mid-run: the run completes, every sample is consumed once, and no
container is left (fault 1 of the reliability issue). Uses a private daemon on its own socket."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from envs.swe.runtime import swe_backend
from envs.swe.tasks import SWETask, load_shipped_tasks
from harness.fleet.docker_hosts import copy_image
from harness.reaper import reap_containers
from harness.sandbox.labels import MANAGED_LABEL
from rollout.cli.run import DEFAULT_RUN_CONFIG
from tests.harness.private_dockerd import PrivateDockerd, running_private_dockerd

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TASK = "swe-taskset__spans-remove-drops-right-part"


@pytest.fixture(scope="module")
def private(docker_client: docker.DockerClient, base_image: str) -> Iterator[PrivateDockerd]:
    with running_private_dockerd(Path(f"/tmp/conductor-test-dockerd-{os.getpid()}")) as daemon:
        # The base and the task image come from the machine's daemon: building them on a fresh
        # daemon (debootstrap) takes most of a minute.
        task_image = asyncio.run(swe_backend("docker").ensure_image(_task()))
        for image in (base_image, task_image):  # with their tags (an untagged copy is rebuilt)
            copy_image(docker_client, daemon.client(), image)
        yield daemon


def _task() -> SWETask:
    (task,) = [t for t in load_shipped_tasks() if t.instance_id == TASK]
    return task


def _ours(client: docker.DockerClient) -> list[str]:
    return [c.id for c in client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"})]


def _start_run(private: PrivateDockerd, out: Path, pool: str = "") -> subprocess.Popen[str]:
    """`conductor run` against the private daemon, returned once two of its containers run."""
    command = [
        sys.executable, "-m", "rollout.cli", "run", str(DEFAULT_RUN_CONFIG),
        "steps=3", "groups_per_step=1", "group_size=2", "trainer.train_time_s=0.1",
        f"task_ids=[{TASK}]",  # one task image to build on the private daemon, not six
        f"pool.overrides=[backend=docker, warm_per_image=1, max_live=6, act_slots=2{pool}]",
        "model.overrides=[cost.t_weights_s=0.0005]", "--out", str(out), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "DOCKER_HOST": private.url, "COLUMNS": "160"}
    run = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 120
    while len(_ours(private.client())) < 2:
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            pytest.fail(f"the run never started two containers:\n{run.communicate()[0]}")
        time.sleep(0.5)
    return run


def test_a_daemon_restart_mid_run_costs_retries_not_the_run(
    private: PrivateDockerd, tmp_path: Path
) -> None:
    run = _start_run(private, tmp_path)
    try:
        time.sleep(2)
        private.restart()
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, output
    assert "not answering" in output  # it waited for the daemon instead of failing samples
    [run_dir] = list(tmp_path.iterdir())
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    groups = [
        json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()
    ]
    samples = [t["sample_id"] for g in groups for t in g["trajectories"]]
    assert len(steps) == 3 and len(samples) == len(set(samples)) == 6
    # Issue 28: a container started in the instant the daemon stops used to outlive the run
    # (about 1 run in 6); its removal is now retried at the pool's close until the daemon
    # takes it, so nothing is left for the next run's reaper.
    assert _ours(private.client()) == []


def test_a_daemon_that_never_returns_ends_the_run_with_one_clear_line(
    private: PrivateDockerd, tmp_path: Path
) -> None:
    outage_s = 4
    run = _start_run(private, tmp_path, pool=f", daemon_outage_s={outage_s}")
    try:
        time.sleep(1)
        private.stop()
        started = time.monotonic()
        output, _ = run.communicate(timeout=120)
        ended_after_s = time.monotonic() - started
    finally:
        if run.poll() is None:
            run.kill()
        private.start()
    assert run.returncode == 1, output
    assert "Traceback" not in output, output[-4000:]
    assert "pool.daemon_outage_s" in output and "--resume" in output
    # Issue 28: with daemon_outage_s=30 a run gave up after about 84 s and printed 96 warnings.
    assert ended_after_s < outage_s + 10, f"it ended {ended_after_s:.0f} s after the stop"
    warnings = [line for line in output.splitlines() if "not answering" in line]
    assert len(warnings) <= outage_s // 10 + 2, "\n".join(warnings)
    reap_containers(private.client())  # what the next run's start does with the stopped ones
    assert _ours(private.client()) == []
