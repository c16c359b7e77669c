"""SIGTERM and SIGINT stop `conductor run` cleanly: no container left, files flushed, non-zero
exit with a line saying what was kept (fault 3 of the reliability issue)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from harness.sandbox.labels import MANAGED_LABEL, parse_owner
from rollout.cli.run import DEFAULT_RUN_CONFIG

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[3]


def _containers_of(client: docker.DockerClient, pid: int) -> list[str]:
    found = []
    for container in client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=1"}):
        owner = parse_owner(container.labels)
        if owner is not None and owner.pid == pid:
            found.append(container.id)
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_run_removes_every_container_and_exits_non_zero(
    docker_client: docker.DockerClient, base_image: str, tmp_path: Path, signum: int
) -> None:
    command = [
        sys.executable, "-m", "rollout.cli", "run", str(DEFAULT_RUN_CONFIG),
        "steps=50", "groups_per_step=2", "group_size=2",
        "pool.overrides=[backend=docker, warm_per_image=1, max_live=8, act_slots=2]",
        "--out", str(tmp_path), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200"}
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while len(_containers_of(docker_client, process.pid)) < 2:
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the run never started its containers"
            time.sleep(0.5)
        time.sleep(3)  # mid-episode: commands running, generations in flight
        process.send_signal(signum)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signum, output
    assert "no container of this run is left" in output, output
    assert _containers_of(docker_client, process.pid) == []
    [run_dir] = list(tmp_path.iterdir())
    for name in ("events.jsonl", "config.yaml"):
        data = (run_dir / name).read_bytes()
        assert data and data.endswith(b"\n"), name  # flushed, no torn line
