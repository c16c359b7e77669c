"""Experiment trackers: off by default; each backend takes the per-step metrics and the
report's figures, read back with the backend's own reader (TensorBoard's event accumulator,
W&B's offline run summary, MLflow's client)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pytest
from matplotlib.figure import Figure

from rollout.observe.trackers import (
    MlflowLogger,
    RunTrackers,
    TrackerError,
    TrackersConfig,
    WandbLogger,
    open_trackers,
)
from rollout.trajectories.batch import Batch
from tests.rollout.trajectory_factory import make_group

BACKENDS = ("tensorboard", "wandb", "mlflow")


def batches() -> list[Batch]:
    """Two steps: the first done 4 s after it was asked for, the second 6 s after the first."""
    first = Batch(1, (tuple(make_group("g0", [1.0, 0.0])),), 0, 0.0, 4.0, 4.0)
    second = Batch(2, (tuple(make_group("g1", [1.0, 1.0])),), 1, 4.5, 10.0, 10.0)
    return [first, second]


def figures(directory: Path) -> Path:
    """A report's plots directory with one real PNG."""
    directory.mkdir(parents=True)
    figure = Figure(figsize=(2, 1))
    figure.add_subplot().plot([0, 1], [0, 1])
    figure.savefig(directory / "busy.png")
    return directory


def log_a_run(backend: str, run_dir: Path) -> RunTrackers:
    trackers = open_trackers(TrackersConfig(backends=(backend,)), run_dir)
    for batch in batches():
        trackers.log_step(batch)
    trackers.log_figures(figures(run_dir / "plots"))
    trackers.close()
    return trackers


def test_trackers_are_off_by_default(tmp_path: Path) -> None:
    trackers = open_trackers(TrackersConfig(), tmp_path)
    trackers.log_step(batches()[0])
    trackers.close()
    assert trackers.loggers == () and list(tmp_path.iterdir()) == []


def test_an_unknown_tracker_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(TrackerError, match=r"unknown tracker 'neptune'.*tensorboard, wandb"):
        open_trackers(TrackersConfig(backends=("neptune",)), tmp_path)


def test_tensorboard_gets_every_step_and_the_figures(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log_a_run("tensorboard", tmp_path / "run")
    events = EventAccumulator(str(tmp_path / "run" / "trackers" / "tensorboard"))
    events.Reload()
    t_next = events.Scalars("rollout/t_next_s")
    assert [(e.step, e.value) for e in t_next] == [(1, 4.0), (2, 6.0)]
    assert [e.value for e in events.Scalars("rollout/reward_mean")] == [0.5, 1.0]
    [image] = events.Images("report/busy")
    assert image.step == 2 and image.width > 0


def wandb_records(run_dir: Path) -> list[dict[str, object]]:
    """The history rows of an offline W&B run: its .wandb log (a LevelDB-style log of 32 KiB
    blocks after a 7-byte `:W&B` header; chunks of checksum, length, type, data) parsed into
    W&B's own protobuf `Record`s, once W&B's writer process has written the run's exit."""
    for _ in range(100):
        rows, ended = _wandb_history(run_dir)
        if ended:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"the W&B run in {run_dir} never recorded its exit")


def _wandb_history(run_dir: Path) -> tuple[list[dict[str, object]], bool]:
    from wandb.proto import wandb_internal_pb2

    [log] = run_dir.glob("*.wandb")
    data = log.read_bytes()
    ended = False
    assert data[:4] == b":W&B"
    block, position, payload = 32768, 7, b""
    rows = []
    while position + 7 <= len(data):
        if block - position % block < 7:  # a block's tail too short for a chunk header
            position += block - position % block
            continue
        length = int.from_bytes(data[position + 4 : position + 6], "little")
        kind = data[position + 6]
        payload += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # FULL, or the LAST chunk of a record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            payload = b""
            ended = ended or record.WhichOneof("record_type") == "exit"
            if record.WhichOneof("record_type") == "history":
                rows.append(
                    {
                        item.key or "/".join(item.nested_key): json.loads(item.value_json)
                        for item in record.history.item
                    }
                )
    return rows, ended


def test_wandb_offline_gets_every_step_and_the_figures(tmp_path: Path) -> None:
    trackers = log_a_run("wandb", tmp_path / "run")
    [logger] = trackers.loggers
    assert isinstance(logger, WandbLogger)
    assert logger.run_dir.name.startswith("offline-run-")  # nothing left the machine
    rows = wandb_records(logger.run_dir)
    t_next = [(row["_step"], row["rollout/t_next_s"]) for row in rows if "rollout/t_next_s" in row]
    assert t_next == [(1, 4.0), (2, 6.0)]
    [figure] = [row for row in rows if "report/busy/path" in row]
    assert figure["_step"] == 2 and figure["report/busy/_type"] == "image-file"
    assert (logger.run_dir / "files" / str(figure["report/busy/path"])).is_file()


def test_mlflow_gets_every_step_and_the_figures(tmp_path: Path) -> None:
    trackers = log_a_run("mlflow", tmp_path / "run")
    [logger] = trackers.loggers
    assert isinstance(logger, MlflowLogger)
    history = logger.client.get_metric_history(logger.run_id, "rollout/t_next_s")
    assert sorted((m.step, m.value) for m in history) == [(1, 4.0), (2, 6.0)]
    [artifact] = logger.client.list_artifacts(logger.run_id, "figures/report/busy")
    assert artifact.path.endswith("busy.png")
    assert logger.client.get_run(logger.run_id).info.status == "FINISHED"


def test_conductor_run_logs_its_steps_and_figures_to_the_configured_tracker(
    tmp_path: Path,
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from typer.testing import CliRunner

    from rollout.cli.app import app
    from rollout.cli.run import DEFAULT_RUN_CONFIG
    from tests.rollout.cli.test_cli_run import SPANS_TASK, TINY_RUN

    args = [str(DEFAULT_RUN_CONFIG), *TINY_RUN, "steps=2", "groups_per_step=1", "group_size=2",
            f"task_ids=[{SPANS_TASK}]", "trackers.backends=[tensorboard]"]  # fmt: skip
    result = CliRunner().invoke(app, ["run", *args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    [run_dir] = list(tmp_path.iterdir())
    events = EventAccumulator(str(run_dir / "trackers" / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("rollout/t_next_s")] == [1, 2]
    assert {"report/busy", "report/t_next"} <= set(events.Tags()["images"])
