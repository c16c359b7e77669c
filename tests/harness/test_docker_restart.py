"""A Docker daemon restarted mid-run: the run completes, every sample is consumed once, and no
container is left (fault 1 of the reliability issue). Uses a private daemon on its own socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from harness.sandbox.labels import MANAGED_LABEL
from rollout.cli.run import DEFAULT_RUN_CONFIG
from tests.harness.private_dockerd import PrivateDockerd

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def private(docker_client: docker.DockerClient, base_image: str) -> Iterator[PrivateDockerd]:
    daemon = PrivateDockerd(Path(f"/tmp/conductor-test-dockerd-{os.getpid()}"))
    try:
        daemon.start()
    except RuntimeError as exc:
        daemon.destroy()
        pytest.skip(f"this machine cannot run a second Docker daemon: {exc}")
    try:
        daemon.client().images.load(b"".join(docker_client.images.get(base_image).save()))
        yield daemon
    finally:
        daemon.destroy()


def _ours(client: docker.DockerClient) -> list[str]:
    return [c.id for c in client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"})]


def test_a_daemon_restart_mid_run_costs_retries_not_the_run(
    private: PrivateDockerd, tmp_path: Path
) -> None:
    command = [
        sys.executable, "-m", "rollout.cli", "run", str(DEFAULT_RUN_CONFIG),
        "steps=3", "groups_per_step=1", "group_size=2", "trainer.train_time_s=0.1",
        "pool.overrides=[backend=docker, warm_per_image=1, max_live=6, act_slots=2]",
        "model.overrides=[cost.t_weights_s=0.0005]", "--out", str(tmp_path), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "DOCKER_HOST": private.url, "COLUMNS": "160"}
    run = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while len(_ours(private.client())) < 2:
            assert run.poll() is None, run.communicate()[0]
            assert time.monotonic() < deadline
            time.sleep(0.5)
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
    assert _ours(private.client()) == []
