"""An engine that dies and stays dead ends `conductor run` with one line, its checkpoint and
the resume command: no exception group, no traceback (issue 28, fault 5). Real HTTP: the
run talks to `conductor serve-sim` in another process, which is killed mid-run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.paths import CONFIGS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        with direct.open(url + "/health", timeout=1):
            return True
    except OSError:
        return False


def _wait_for(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        time.sleep(0.2)


def test_an_engine_that_stays_dead_ends_the_run_in_one_line_with_the_resume_command(
    tmp_path: Path,
) -> None:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "1000"}
    server = subprocess.Popen(
        [sys.executable, "-m", "rollout.cli", "serve-sim", f"port={port}"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    run = None
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(lambda: _answers(url), 60, "serve-sim answering")  # `run` probes it at once
        engine = [
            f"engine.endpoints=[{url}]", "engine.poll_interval_s=0.2",
            "engine.probe_interval_s=0.5", "engine.unresponsive_after_s=1", "engine.outage_s=4",
        ]  # fmt: skip
        run = subprocess.Popen(
            [
                sys.executable, "-m", "rollout.cli", "run", str(CONFIGS / "run" / "sglang.yaml"),
                *engine, "steps=50", "groups_per_step=1", "group_size=2", "async_factor=1",
                "pool.overrides=[backend=local, warm_per_image=1, max_live=4, act_slots=2]",
                "trainer.train_time_s=0.1", "--out", str(tmp_path), "--no-report",
            ],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        _wait_for(lambda: list(tmp_path.glob("*/checkpoint.json")), 240, "a first checkpoint")
        server.send_signal(signal.SIGKILL)  # the engine dies and stays dead
        killed = time.monotonic()
        output, _ = run.communicate(timeout=120)
        took = time.monotonic() - killed
    finally:
        for process in (server, run):
            if process is not None and process.poll() is None:
                process.kill()
    assert run.returncode == 1, output
    assert "Traceback" not in output and "ExceptionGroup" not in output, output
    [error] = [line for line in output.splitlines() if line.startswith("error:")]
    assert "no endpoint has answered" in error and "conductor run --resume" in error
    [run_dir] = list(tmp_path.iterdir())
    assert (run_dir / "checkpoint.json").exists() and str(run_dir) in error
    assert took < 60, f"the run took {took:.0f} s to end after the engine died"
    print(f"the run ended {took:.1f} s after its engine was killed (outage_s=4): {error}")
