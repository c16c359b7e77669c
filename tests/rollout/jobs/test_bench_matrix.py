"""scripts/bench_matrix.sh: the smoke cell runs and writes a table; the full matrix's cells."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "bench_matrix.sh"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONDUCTOR": str(Path(sys.executable).parent / "conductor")}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_smoke_cell_writes_a_simulated_table_with_the_tuned_baseline(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "bench.md"
    done = run_script("--smoke", str(out), "0")
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("**SIMULATED") and "| policy | T_next |" in text
    assert "| conductor |" in text and "| traj_async[agent_slots=2] |" in text
    assert "| adaptive_inflight |" in text and "| sample_refill |" in text
    assert "best traj_async:" in text
    assert "== smoke:" in done.stderr and "1 cells in" in done.stderr


def test_the_matrix_covers_both_models_every_workload_both_batch_sizes_and_async_factors() -> None:
    done = run_script("--list")
    assert done.returncode == 0, done.stderr
    cells = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    expected = {
        f"{workload}-{model}-B{b}-a{factor}"
        for model in ("8B", "32B")
        for workload in ("swe_like", "heavy_tail", "short_context")
        for b in (4, 16)
        for factor in (0, 2)
    }
    growth = {f"growth-{model}-B{b}-a2" for model in ("8B", "32B") for b in (4, 16)}
    drift = {"drift-32B-B4-a2", "drift-8B-B16-a2"}
    assert set(cells) == expected | growth | drift
    for cell in growth | drift:
        assert f"configs/simulate/{cell.split('-')[0]}.yaml" in cells[cell], cell
        assert f"qwen3_{cell.split('-')[1].lower()}_h200" in cells[cell], cell
        assert "--figures" in cells[cell] and "--sweep aggressive:" in cells[cell], cell
    for cell, args in cells.items():
        assert ("adaptive_inflight,sample_refill" in args) == cell.endswith("-a2"), cell
    for cell, args in cells.items():
        assert "policies=[conductor," in args and "--sweep traj_async:" in args, cell
        assert f"groups_per_step={cell.split('-B')[1].split('-')[0]}" in args, cell
        assert ("qwen3_32b" in args) == ("-32B-" in cell), cell
    kv_tight = {
        cell
        for cell in expected
        if cell.endswith("-a2")
        and (cell.startswith(("swe_like-32B", "heavy_tail-32B")) or cell == "swe_like-8B-B16-a2")
    }
    with_ablations = {cell for cell, args in cells.items() if "no_kv_residency" in args}
    assert with_ablations == kv_tight
    figures = {cell for cell, args in cells.items() if "--figures" in args}
    assert figures == kv_tight | growth | drift


def test_every_sweep_is_refined_in_steps_of_at_most_four() -> None:
    script = SCRIPT.read_text()
    assert "REFINE=${REFINE:-4}" in script and '--refine "$REFINE"' in script


def test_cells_keeps_only_the_matching_cells_and_an_empty_choice_is_an_error() -> None:
    done = run_script("--list", "--cells", "^(swe_like|heavy_tail)-32B-B4-a2$")
    assert done.returncode == 0, done.stderr
    ids = [line.split(": ", 1)[0] for line in done.stdout.splitlines()]
    assert ids == ["swe_like-32B-B4-a2", "heavy_tail-32B-B4-a2"]
    nothing = run_script("--list", "--cells", "no-such-cell")
    assert nothing.returncode == 2 and "no cell matches" in nothing.stderr
