"""scripts/per_step_oracle.py: the per-step oracle takes each step's fastest variant."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from rollout.observe.run_summary import RunSummary
from tests.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "per_step_oracle.py"
CONFIG = REPO_ROOT / "configs" / "simulate" / "short_context.yaml"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("per_step_oracle", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(name: str, t_next: tuple[float, ...]) -> RunSummary:
    return RunSummary(
        policy=name, t_next_s=t_next, trainer_wait_s=(), e_rollout=None, busy_fraction=None,
        kv_hit_rate=None, recomputed_tokens=0, preemptions=0, interruptions=0,
        rewards_mean=None, samples=0, infra_failures=0,
    )  # fmt: skip


def test_the_oracle_picks_each_steps_fastest_variant_and_the_best_fixed_one_by_its_mean() -> None:
    row = _script().oracle_row(
        0,
        _run("ours", (90.0, 90.0)),
        [("t[slots=8]", _run("a", (100.0, 300.0))), ("t[slots=16]", _run("b", (200.0, 150.0)))],
    )
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    assert cells[2] == "175.0 s (t[slots=16])"  # fixed: mean 175 beats mean 200
    assert cells[3] == "125.0 s"  # per step: 100 (slots 8), then 150 (slots 16)
    assert cells[4] == "1.400×" and cells[5] == "1.944×"
    assert cells[6] == "8 16"


def test_it_runs_a_sweep_on_a_real_simulation(tmp_path: Path) -> None:
    out = tmp_path / "oracle.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(CONFIG), "steps=2", "groups_per_step=2",
         "group_size=2", "trainer.train_time_s=1",
         "--sweep", "traj_async:conductor.agent_slots=2,4", "--seeds", "0",
         "--markdown", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in out.read_text().splitlines() if re.match(r"\| 0 \|", line)]
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    best, oracle = (float(cells[i].split(" s")[0].replace(",", "")) for i in (2, 3))
    assert 0 < oracle <= best
    assert len(cells[6].split()) == 2 and set(cells[6].split()) <= {"2", "4"}
