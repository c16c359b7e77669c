"""Spec of a simulated cluster run: several engines and an env fleet on one virtual clock.

The default cluster is the single-engine run; every engine gets work and keeps its KV within
its own pool; the busy fraction is the mean over engines; and an env fleet that is too small
makes tool calls queue (one act slot serializes them in virtual time).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from foundation.config import load_config
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import resolve_policy
from rollout.jobs.simulation import CLUSTER_FILE, PolicyRun, simulate_policy
from rollout.jobs.simulation_plan import load_simulation
from rollout.simulation.vtime import run_virtual
from tests.paths import CONFIGS

SMALL = (
    "steps=2",
    "groups_per_step=4",
    "group_size=2",
    "trainer.train_time_s=2",
    "conductor.timeseries_interval_s=0.05",  # dense KV samples for the per-engine peak
)


def _run(overrides: Sequence[str] = (), run_dir: Path | None = None) -> PolicyRun:
    config = load_config(
        SimulateConfig, CONFIGS / "simulate" / "short_context.yaml", [*SMALL, *overrides]
    )
    simulation = load_simulation(config, CONFIGS / "simulate")
    return run_virtual(simulate_policy(simulation, resolve_policy("conductor"), run_dir=run_dir))


def test_one_engine_and_an_unlimited_fleet_time_the_run_exactly_as_no_cluster_does() -> None:
    plain = _run()
    fleet = _run(["cluster.env_nodes=3"])
    assert fleet.summary == plain.summary
    assert plain.fleet is None and fleet.fleet is not None
    assert fleet.fleet.act_wait_s_mean == 0.0


def test_with_two_engines_both_get_work_and_each_keeps_its_kv_within_its_own_pool() -> None:
    run = _run(["cluster.engines=2"])
    assert [figure.name for figure in run.engines] == ["sim-0", "sim-1"]
    for figure in run.engines:
        assert figure.requests > 0
        assert figure.kv_used_peak_tokens is not None and figure.kv_used_peak_tokens > 0
        assert figure.kv_used_peak_tokens <= figure.kv_capacity_tokens
    assert sum(figure.requests for figure in run.engines) >= run.summary.samples


def test_the_cluster_busy_fraction_is_the_mean_over_engines() -> None:
    run = _run(["cluster.engines=2"])
    per_engine = [figure.busy_fraction for figure in run.engines]
    assert all(value is not None for value in per_engine)
    assert run.summary.busy_fraction == pytest.approx(sum(per_engine) / 2)  # type: ignore[arg-type]


def test_one_act_slot_serializes_every_tool_call_of_the_fleet_in_virtual_time(
    tmp_path: Path,
) -> None:
    free = _run(["cluster.env_nodes=1"])
    run = _run(["cluster.env_nodes=1", "cluster.node.act_slots=1"], run_dir=tmp_path)
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    acts = sorted((e["start_s"], e["end_s"]) for e in events if e["phase"] == "act")
    assert len(acts) > 1
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(acts))
    assert run.fleet is not None and run.fleet.peak_acting_per_node == 1
    assert run.fleet.act_wait_s_mean > 0
    assert run.summary.mean_t_next_s > free.summary.mean_t_next_s
    assert run.summary.e_rollout is not None and free.summary.e_rollout is not None
    assert run.summary.e_rollout < free.summary.e_rollout  # the queueing is pre_act time


def test_a_cluster_run_directory_holds_each_engine_and_the_fleet_labelled_simulated(
    tmp_path: Path,
) -> None:
    _run(["cluster.engines=2", "cluster.env_nodes=2"], run_dir=tmp_path)
    document = json.loads((tmp_path / CLUSTER_FILE).read_text())
    assert document["simulated"] is True
    assert document["cost_model"]["t_fix_s"] > 0
    assert [engine["name"] for engine in document["engines"]] == ["sim-0", "sim-1"]
    assert document["fleet"]["nodes"] == 2


def test_a_default_run_directory_has_no_cluster_file(tmp_path: Path) -> None:
    _run(run_dir=tmp_path)
    assert not (tmp_path / CLUSTER_FILE).exists()
