"""scripts/step_work_split.py on a real simulated run: one row per step, the split adds up."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO_ROOT

CONFIG = REPO_ROOT / "configs" / "simulate" / "short_context.yaml"


def test_the_split_of_a_simulated_run_has_a_row_per_step_that_adds_up(tmp_path: Path) -> None:
    conductor = Path(sys.executable).parent / "conductor"
    overrides = ["steps=2", "groups_per_step=2", "group_size=2", "trainer.train_time_s=1",
                 "policies=[conductor]"]  # fmt: skip
    made = subprocess.run(
        [str(conductor), "simulate", str(CONFIG), *overrides, "--out", str(tmp_path),
         "--no-report"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    (run,) = tmp_path.glob("*/conductor")
    out = tmp_path / "split.md"
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "step_work_split.py"), str(run),
         "--markdown", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line for line in out.read_text().splitlines() if re.match(r"\| \d+ \|", line)]
    assert [row.split("|")[1].strip() for row in rows] == ["1", "2"]
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        own, later, never = (float(cell.rstrip(" s").replace(",", "")) for cell in cells[3:6])
        assert own > 0 and later >= 0 and never >= 0
        assert 0 < int(cells[6].rstrip("%")) <= 100
