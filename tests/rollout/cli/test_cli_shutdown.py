"""SIGTERM and SIGINT stop `conductor run` cleanly: no container left, files flushed, non-zero
exit with a line saying what was kept (fault 3 of the reliability issue)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from harness.sandbox.labels import MANAGED_LABEL, parse_owner
from rollout.cli.run import DEFAULT_RUN_CONFIG

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[3]


def _containers_of(client: docker.DockerClient, pid: int) -> list[str]:
    found = []
    # The listing's own labels: an inspect per container would race with other processes
    # removing theirs on this shared daemon (issue 28).
    for record in client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"}):
        owner = parse_owner(record.get("Labels") or {})
        if owner is not None and owner.pid == pid:
            found.append(str(record["Id"]))
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


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 KiB tmpfs: the run directory fills it within seconds (needs root, as CI runs)."""
    mount_point = tmp_path / "full"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (root needed): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_under_the_run_directory_stops_the_run_cleanly(
    docker_client: docker.DockerClient, base_image: str, full_disk: Path
) -> None:
    """Fault 3's last case: on ENOSPC 7 of 12 containers leaked, with a traceback."""
    command = [
        sys.executable, "-m", "rollout.cli", "run", str(DEFAULT_RUN_CONFIG),
        "steps=20", "groups_per_step=2", "group_size=4", "trainer.train_time_s=0.1",
        "pool.overrides=[backend=docker, warm_per_image=1, max_live=8, act_slots=2]",
        "model.overrides=[cost.t_weights_s=0.0005]", "--out", str(full_disk), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200"}
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 1, output
    assert "No space left on device" in output and "--resume" in output, output
    assert "Traceback" not in output, output
    assert _containers_of(docker_client, process.pid) == []  # the daemon is shared: the run's
