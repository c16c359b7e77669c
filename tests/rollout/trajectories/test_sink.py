"""Spec of the trajectory sink and its writers: whole groups, crash safety, exact round trips."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from rollout.core.config import SinkConfig
from rollout.core.types import Trajectory
from rollout.errors import SinkError
from rollout.trajectories.sink import TrajectorySink
from rollout.trajectories.writers import (
    JsonlTrajectoryWriter,
    ParquetTrajectoryWriter,
    build_writers,
    read_jsonl_groups,
    read_parquet_groups,
)
from tests.rollout.trajectory_factory import make_group, make_trajectory


class RecordingWriter:
    def __init__(self) -> None:
        self.groups: list[tuple[Trajectory, ...]] = []
        self.closed = False

    def write_group(self, group: Sequence[Trajectory]) -> None:
        self.groups.append(tuple(group))

    def close(self) -> None:
        self.closed = True


# -- the sink ---------------------------------------------------------------------------------


def test_group_is_written_only_when_all_its_samples_are_in() -> None:
    writer = RecordingWriter()
    sink = TrajectorySink(group_size=3, writers=[writer])
    group = make_group("g", [1.0, 0.0, 1.0])
    sink.add(group[0])
    sink.add(group[1])
    assert writer.groups == []
    sink.add(group[2])
    assert len(writer.groups) == 1


def test_group_is_ordered_by_sample_index_whatever_the_finishing_order() -> None:
    sink = TrajectorySink(group_size=3)
    group = make_group("g", [1.0, 0.0, 1.0])
    for trajectory in (group[2], group[0], group[1]):
        completed = sink.add(trajectory)
    assert completed is not None and [t.sample_index for t in completed] == [0, 1, 2]


def test_infra_error_sample_still_completes_its_group() -> None:
    sink = TrajectorySink(group_size=2)
    sink.add(make_trajectory("g", 0, reward=1.0))
    assert sink.add(make_trajectory("g", 1, reward=None, infra_error="engine died")) is not None


def test_unrewarded_sample_is_refused() -> None:
    with pytest.raises(SinkError, match="reward"):
        TrajectorySink(group_size=2).add(make_trajectory(reward=None))


def test_the_same_sample_cannot_be_added_twice() -> None:
    sink = TrajectorySink(group_size=2)
    sink.add(make_trajectory("g", 0))
    with pytest.raises(SinkError, match="twice"):
        sink.add(make_trajectory("g", 0))


def test_batch_is_handed_out_only_when_enough_groups_are_ready() -> None:
    sink = TrajectorySink(group_size=1)
    sink.add(make_trajectory("g1"))
    assert sink.take_batch(2) is None
    sink.add(make_trajectory("g2"))
    batch = sink.take_batch(2)
    assert batch is not None and [group[0].group_id for group in batch] == ["g1", "g2"]
    assert sink.ready_groups == 0


def test_a_windowed_batch_takes_only_eligible_groups_and_keeps_the_rest_in_order() -> None:
    sink = TrajectorySink(group_size=1)
    for group in ("g3", "g1", "g4", "g2"):  # completion order
        sink.add(make_trajectory(group))
    assert sink.ready_among({"g1", "g2"}) == 2 and sink.ready_among(None) == 4
    assert sink.take_batch(3, eligible={"g1", "g2"}) is None  # nothing taken
    batch = sink.take_batch(2, eligible={"g1", "g2", "g9"})
    assert batch is not None and [group[0].group_id for group in batch] == ["g1", "g2"]
    rest = sink.take_batch(2)
    assert rest is not None and [group[0].group_id for group in rest] == ["g3", "g4"]


def test_closing_the_sink_closes_its_writers() -> None:
    writer = RecordingWriter()
    TrajectorySink(group_size=1, writers=[writer]).close()
    assert writer.closed


# -- JSONL ------------------------------------------------------------------------------------


def test_jsonl_round_trip_is_exact(tmp_path: Path) -> None:
    groups = [make_group("g1", [1.0, 0.0]), make_group("g2", [0.5, None], infra_error=None)]
    groups[1][1] = make_trajectory("g2", 1, reward=None, infra_error="container died")
    writer = JsonlTrajectoryWriter(tmp_path / "t.jsonl")
    for group in groups:
        writer.write_group(group)
    writer.close()
    assert list(read_jsonl_groups(tmp_path / "t.jsonl")) == [tuple(g) for g in groups]


def test_jsonl_reader_skips_a_group_torn_by_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = JsonlTrajectoryWriter(path)
    writer.write_group(make_group("whole", [1.0]))
    writer.close()
    torn = JsonlTrajectoryWriter(tmp_path / "other.jsonl")
    torn.write_group(make_group("torn", [1.0]))
    torn.close()
    line = (tmp_path / "other.jsonl").read_bytes()
    with path.open("ab") as file:
        file.write(line[: len(line) // 2])  # the process died mid-write
    assert [g[0].group_id for g in read_jsonl_groups(path)] == ["whole"]


def test_reopened_jsonl_writer_cuts_the_torn_tail_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"group_id": "torn", "trajec')
    writer = JsonlTrajectoryWriter(path)
    writer.write_group(make_group("after", [1.0]))
    writer.close()
    assert [g[0].group_id for g in read_jsonl_groups(path)] == ["after"]


def test_corrupt_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("not json\n")
    with pytest.raises(SinkError, match=":1"):
        list(read_jsonl_groups(path))


# -- Parquet ----------------------------------------------------------------------------------


def test_parquet_round_trip_is_exact(tmp_path: Path) -> None:
    groups = [make_group("g1", [1.0, 0.0]), make_group("g2", [0.25, 0.75], turns=3)]
    writer = ParquetTrajectoryWriter(tmp_path)
    for group in groups:
        writer.write_group(group)
    writer.close()
    assert read_parquet_groups(tmp_path) == [tuple(g) for g in groups]


def test_parquet_part_appears_atomically_and_leftover_temp_files_are_ignored(
    tmp_path: Path,
) -> None:
    (tmp_path / "part-000000.parquet.tmp").write_bytes(b"half a file from a crash")
    writer = ParquetTrajectoryWriter(tmp_path)
    writer.write_group(make_group("g1", [1.0]))
    assert [g[0].group_id for g in read_parquet_groups(tmp_path)] == ["g1"]


def test_parquet_buffers_groups_until_a_part_is_full(tmp_path: Path) -> None:
    writer = ParquetTrajectoryWriter(tmp_path, groups_per_file=2)
    writer.write_group(make_group("g1", [1.0]))
    assert read_parquet_groups(tmp_path) == []
    writer.write_group(make_group("g2", [1.0]))
    assert len(read_parquet_groups(tmp_path)) == 2


def test_parquet_writer_after_a_restart_continues_the_part_numbering(tmp_path: Path) -> None:
    first = ParquetTrajectoryWriter(tmp_path)
    first.write_group(make_group("g1", [1.0]))
    first.close()
    second = ParquetTrajectoryWriter(tmp_path)
    second.write_group(make_group("g2", [1.0]))
    second.close()
    assert [g[0].group_id for g in read_parquet_groups(tmp_path)] == ["g1", "g2"]


def test_build_writers_follows_the_config(tmp_path: Path) -> None:
    config = SinkConfig(formats=("jsonl", "parquet"), directory=str(tmp_path), fsync=False)
    writers = build_writers(config)
    assert [type(w) for w in writers] == [JsonlTrajectoryWriter, ParquetTrajectoryWriter]
    for writer in writers:
        writer.close()


def test_discarded_samples_leave_an_incomplete_group_and_may_arrive_again() -> None:
    writer = RecordingWriter()
    sink = TrajectorySink(group_size=3, writers=[writer])
    first, second, third = make_group("g", [1.0, 0.0, 1.0])
    sink.add(first)
    sink.add(second)
    assert [t.sample_id for t in sink.pending_members("g")] == [first.sample_id, second.sample_id]
    assert sink.discard("g", [second.sample_id, "not-there"]) == (second,)
    assert sink.add(third) is None  # two in, not three: the discarded one is missing
    again = make_trajectory("g", 1, reward=1.0, version=1)
    group = sink.add(again)
    assert group is not None and [t.sample_index for t in group] == [0, 1, 2]
    assert group[1] is again and len(writer.groups) == 1
    assert sink.discard("g", [first.sample_id]) == ()  # complete groups are never touched
    assert sink.pending_members("g") == () and sink.pending_groups == 0
