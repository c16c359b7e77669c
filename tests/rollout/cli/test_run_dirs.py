"""Run directories are unique even for runs started in the same second."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rollout.cli.run_dirs import new_run_dir


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path: Path) -> None:
    now = 1_800_000_000.0
    with ThreadPoolExecutor(max_workers=8) as pool:
        made = list(pool.map(lambda _: new_run_dir(tmp_path, now=now), range(16)))
    assert len(set(made)) == 16 and all(path.is_dir() for path in made)
    assert sorted(p.name for p in made)[0].count("-") == 1  # the first keeps the bare stamp


def test_a_run_directory_is_created_under_a_missing_parent(tmp_path: Path) -> None:
    made = new_run_dir(tmp_path / "runs" / "nested")
    assert made.parent == tmp_path / "runs" / "nested" and not any(made.iterdir())
