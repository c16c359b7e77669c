"""Weak scaling of the simulated cluster: B, engines and env nodes grow together with N, and
every run reports its cluster's size, consumed samples and wall time."""

from __future__ import annotations

import pytest

from foundation.config import load_config
from rollout.jobs.bench_rollout import (
    WEAK_SCALING_COLUMNS,
    run_weak_scaling,
    weak_scaling_notes,
    weak_scaling_overrides,
    weak_scaling_rows,
)
from rollout.jobs.config import SimulateConfig
from tests.paths import CONFIGS

UNIT = CONFIGS / "simulate" / "cluster_weak.yaml"
TINY = ["steps=1", "groups_per_step=1", "group_size=2", "trainer.train_time_s=1"]


def test_scaling_multiplies_b_the_engines_and_the_env_nodes_by_n() -> None:
    base = load_config(
        SimulateConfig, UNIT, ["groups_per_step=3", "cluster.engines=2", "cluster.env_nodes=1"]
    )
    assert weak_scaling_overrides(base, 8) == (
        "groups_per_step=24",
        "cluster.engines=16",
        "cluster.env_nodes=8",
    )
    with pytest.raises(ValueError, match="at least one engine"):
        weak_scaling_overrides(base, 0)


def test_the_shipped_unit_is_one_engine_with_one_env_node_and_four_groups() -> None:
    unit = load_config(SimulateConfig, UNIT)
    assert (unit.groups_per_step, unit.cluster.engines, unit.cluster.env_nodes) == (4, 1, 1)
    assert unit.group_size * unit.steps * unit.groups_per_step * 64 >= 10_000  # at N = 64


def test_each_cluster_size_consumes_n_times_the_samples_and_is_reported_simulated() -> None:
    simulation, rows = run_weak_scaling(UNIT, TINY, [1, 2])
    assert [(row.engines, row.env_nodes, row.groups_per_step) for row in rows] == [
        (1, 1, 1),
        (2, 2, 2),
    ]
    assert [row.summary.samples for row in rows] == [2, 4]
    assert all(row.wall_s > 0 for row in rows)
    cells = weak_scaling_rows(rows)
    assert len(cells) == 2 and all(len(row) == len(WEAK_SCALING_COLUMNS) for row in cells)
    assert cells[0][5] == "1.00×"  # T_next relative to the first size
    notes = " ".join(weak_scaling_notes(simulation))
    assert "SIMULATED" in notes and "t_fix" in notes and "act_slots 64" in notes
    assert "B = 1 groups" in notes  # the per-engine unit, not a scaled run


def test_no_cluster_size_is_refused() -> None:
    with pytest.raises(ValueError, match="cluster size"):
        run_weak_scaling(UNIT, TINY, [])
