"""Kill `conductor run` with SIGKILL at random points, resume it each time, and check that the
consumed groups equal an uninterrupted run's, with no sample id twice.

    python scripts/crash_resume.py [--kills 20] [--seed 0] [--backend local|docker]

Runs the `sync` policy (its consumed groups do not depend on timing, so an uninterrupted run
is the reference). Prints one line per kill and a verdict; exits 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_args(backend: str, steps: int) -> list[str]:
    return [
        f"steps={steps}", "groups_per_step=1", "group_size=2", "policy=sync", "seed=4",
        f"pool.overrides=[backend={backend}, warm_per_image=1, max_live=6, act_slots=2]",
        "model.overrides=[cost.t_weights_s=0.0005]", "trainer.train_time_s=0.1",
    ]  # fmt: skip


def conductor(*args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "rollout.cli", "run", *args, "--no-report"]
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL)


def consumed(run_dir: Path) -> tuple[list[list[str]], list[str]]:
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    groups = [
        json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()
    ]
    samples = [t["sample_id"] for group in groups for t in group["trajectories"]]
    return [step["groups"] for step in sorted(steps, key=lambda s: s["step"])], samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="local", choices=["local", "docker"])
    args = parser.parse_args()
    draw = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="crash-resume-") as scratch:
        reference_out, crashed_out = Path(scratch) / "reference", Path(scratch) / "crashed"
        started = time.monotonic()
        assert (
            conductor(*run_args(args.backend, args.steps), "--out", str(reference_out)).wait() == 0
        )
        full_s = time.monotonic() - started
        reference, _ = consumed(next(reference_out.iterdir()))
        process = conductor(*run_args(args.backend, args.steps), "--out", str(crashed_out))
        kills = 0
        while True:
            delay = draw.uniform(0.5, max(1.5, full_s / 6))  # short: most kills land mid-run
            try:
                code = process.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                if kills < args.kills:
                    process.send_signal(signal.SIGKILL)
                    process.wait()
                    kills += 1
                    print(f"kill {kills}: SIGKILL after {delay:.1f} s", flush=True)
                    code = None
                else:
                    code = process.wait()
            if code == 0:
                break
            if code is not None:  # it failed by itself: resuming cannot help
                print(f"the run exited with {code} without being killed", flush=True)
                return 1
            made = list(crashed_out.iterdir()) if crashed_out.exists() else []
            if made and not (made[0] / "resume.json").exists():
                shutil.rmtree(made[0])  # killed between its mkdir and its first write
                made = []
            if made:
                process = conductor("--resume", str(made[0]))
            else:  # killed before it made its run directory: nothing to resume, start again
                process = conductor(*run_args(args.backend, args.steps), "--out", str(crashed_out))
        steps, samples = consumed(next(crashed_out.iterdir()))
    same = steps == reference
    unique = len(samples) == len(set(samples))
    print(
        f"{kills} kills; consumed groups equal the uninterrupted run's: {same}; "
        f"sample ids unique: {unique} ({len(samples)} samples)"
    )
    return 0 if same and unique else 1


if __name__ == "__main__":
    sys.exit(main())
