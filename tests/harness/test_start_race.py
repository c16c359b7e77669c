"""Runs starting together on one daemon, while containers churn, never crash (real Docker).

The smaller version of `python scripts/start_race.py --starts 50` (issue 28: 6 of about 40
starts and resumes ended with rc 1 and "No such container").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docker
import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]


def test_concurrent_starts_with_container_churn_never_crash(
    docker_client: docker.DockerClient, base_image: str
) -> None:
    result = subprocess.run(
        [sys.executable, "scripts/start_race.py", "--starts", "8", "--concurrency", "4"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    assert "8 starts" in summary and ": 0 crashed;" in summary, result.stdout
    assert summary.endswith("containers of the race left: 0"), result.stdout
