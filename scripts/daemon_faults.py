"""Docker daemon faults, counted: restarts mid-run and a daemon that never comes back.

    python scripts/daemon_faults.py [--restarts 6] [--down-s 5] [--outage-s 30]

Runs `conductor run` (3 steps, one task) against a private daemon on its own socket (the
machine's daemon is never touched; needs root, `dockerd` and `unshare`). Each restart trial
restarts the daemon mid-run, `--down-s` seconds down, and counts the run's exit code and the
project containers left once it ended (before any reaper runs). The outage trial stops the
daemon for good with `pool.daemon_outage_s=--outage-s`, and reports how long after dockerd
was sent SIGTERM (it stops answering as it shuts down) the run ended, its exit code, its
"not answering" warning lines and whether it names the resume command.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from envs.swe.runtime import swe_backend  # noqa: E402
from envs.swe.tasks import load_shipped_tasks  # noqa: E402
from harness.fleet.docker_hosts import copy_image  # noqa: E402
from harness.images import ensure_base_image  # noqa: E402
from harness.sandbox.docker import docker_client  # noqa: E402
from harness.sandbox.labels import MANAGED_LABEL  # noqa: E402
from rollout.cli.run import DEFAULT_RUN_CONFIG  # noqa: E402
from tests.harness.private_dockerd import PrivateDockerd  # noqa: E402

TASK = "swe-taskset__spans-remove-drops-right-part"


def _ours(daemon: PrivateDockerd) -> int:
    records = daemon.client().api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"})
    return len(records)


def _start_run(daemon: PrivateDockerd, out: Path, pool: str = "") -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "rollout.cli", "run", str(DEFAULT_RUN_CONFIG),
        "steps=3", "groups_per_step=1", "group_size=2", "trainer.train_time_s=0.1",
        f"task_ids=[{TASK}]",
        f"pool.overrides=[backend=docker, warm_per_image=1, max_live=6, act_slots=2{pool}]",
        "model.overrides=[cost.t_weights_s=0.0005]", "--out", str(out), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "DOCKER_HOST": daemon.url, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    run = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 180
    while _ours(daemon) < 2:
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            raise RuntimeError(f"the run never started two containers:\n{run.communicate()[0]}")
        time.sleep(0.5)
    return run


def restart_trial(daemon: PrivateDockerd, out: Path, down_s: float) -> tuple[int, int]:
    """(exit code, containers left after the run) of one run whose daemon restarts."""
    run = _start_run(daemon, out)
    time.sleep(2)
    daemon.restart(down_s=down_s)
    run.communicate(timeout=600)
    return run.returncode, _ours(daemon)


def outage_trial(daemon: PrivateDockerd, out: Path, outage_s: float) -> dict[str, object]:
    run = _start_run(daemon, out, pool=f", daemon_outage_s={outage_s:g}")
    time.sleep(1)
    stopped = time.monotonic()  # SIGTERM to dockerd: it stops answering as it shuts down
    daemon.stop()
    output, _ = run.communicate(timeout=600)
    ended_s = time.monotonic() - stopped
    daemon.start()
    lines = output.strip().splitlines()
    return {
        "exit": run.returncode,
        "ended_after_s": round(ended_s, 1),
        "warning_lines": sum("not answering" in line for line in lines),
        "resume_hint": "--resume" in output,
        "traceback": "Traceback" in output,
        "stopped_containers_left": _ours(daemon),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=6)
    parser.add_argument("--down-s", type=float, default=5.0)
    parser.add_argument("--outage-s", type=float, default=30.0)
    args = parser.parse_args()
    machine = docker_client()
    base = ensure_base_image(machine, progress=lambda line: None)
    (task,) = [t for t in load_shipped_tasks() if t.instance_id == TASK]
    task_image = asyncio.run(swe_backend("docker").ensure_image(task))
    with tempfile.TemporaryDirectory(prefix="daemon-faults-") as scratch:
        daemon = PrivateDockerd(Path(scratch) / "dockerd")
        daemon.start()
        try:
            for image in (base, task_image):
                copy_image(machine, daemon.client(), image)
            outcomes = [
                restart_trial(daemon, Path(scratch) / f"restart-{index}", args.down_s)
                for index in range(args.restarts)
            ]
            print(
                f"restart ({args.down_s:g} s down) x {args.restarts}: exit codes "
                f"{[code for code, _ in outcomes]}, containers left "
                f"{[left for _, left in outcomes]}"
            )
            outage = outage_trial(daemon, Path(scratch) / "outage", args.outage_s)
            print(f"daemon gone, daemon_outage_s={args.outage_s:g}: {outage}")
        finally:
            daemon.destroy()


if __name__ == "__main__":
    main()
