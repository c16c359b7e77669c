"""A training run's trajectories.jsonl holds exactly the consumed groups, with their step;
the rest go to unconsumed.jsonl (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

from rollout.core.types import Trajectory
from rollout.trajectories.sink import TrajectorySink
from rollout.trajectories.writers import UNCONSUMED_JSONL, ConsumedJsonlWriter, read_jsonl_groups
from tests.rollout.trajectory_factory import make_trajectory


def _group(group_id: str) -> list[Trajectory]:
    return [make_trajectory(group_id=group_id, index=index) for index in range(2)]


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_group_is_written_when_a_step_consumes_it_and_the_rest_at_close(
    tmp_path: Path,
) -> None:
    writer = ConsumedJsonlWriter(tmp_path / "trajectories.jsonl", fsync=False)
    sink = TrajectorySink(group_size=2, writers=[writer])
    for group_id in ("g1", "g2", "g3"):
        for trajectory in _group(group_id):
            sink.add(trajectory)
    assert (tmp_path / "trajectories.jsonl").read_text() == ""  # none consumed yet
    writer.consumed(["g2"], step=1)
    writer.consumed(["g1"], step=2)
    sink.close()
    consumed = _lines(tmp_path / "trajectories.jsonl")
    assert [(line["group_id"], line["step"]) for line in consumed] == [("g2", 1), ("g1", 2)]
    unconsumed = _lines(tmp_path / UNCONSUMED_JSONL)
    assert [(line["group_id"], line["step"]) for line in unconsumed] == [("g3", None)]
    assert [g[0].group_id for g in read_jsonl_groups(tmp_path / "trajectories.jsonl")] == [
        "g2",
        "g1",
    ]


def test_a_run_that_consumed_everything_leaves_no_unconsumed_file(tmp_path: Path) -> None:
    writer = ConsumedJsonlWriter(tmp_path / "trajectories.jsonl", fsync=False)
    writer.write_group(_group("g1"))
    writer.consumed(["g1"], step=1)
    writer.close()
    assert not (tmp_path / UNCONSUMED_JSONL).exists()
