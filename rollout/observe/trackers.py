"""Experiment trackers: a run's per-step metrics and its report's figures in TensorBoard, W&B or
MLflow, behind one small interface (`ExperimentLogger`). Off by default.

Configured in the run config (`trackers: {backends: [tensorboard, wandb, mlflow]}`, fields of
`TrackersConfig`); every backend writes under the run directory unless told otherwise:
TensorBoard event files in `trackers/tensorboard`, W&B in offline mode in `trackers/wandb`
(`wandb sync` uploads it later), MLflow to a SQLite store and artifact directory in
`trackers/mlflow` (MLflow 3 keeps its file store in maintenance mode). A backend whose
package is not installed fails at start with the `pip install` to run.

`RunTrackers` is what a run holds: `log_step(batch)` after each training step (`step_metrics`:
T_next, trainer wait, rewards, staleness, samples lost), `log_figures(plots_dir)` once the
report's PNGs exist, `close()` at the end. Users plug their own backend with `factories`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from pydantic import Field

from foundation.config import FrozenConfig
from rollout.errors import RolloutError
from rollout.trajectories.batch import Batch

__all__ = [
    "DEFAULT_TRACKERS",
    "ExperimentLogger",
    "MlflowLogger",
    "RunTrackers",
    "TensorBoardLogger",
    "TrackerError",
    "TrackersConfig",
    "WandbLogger",
    "open_trackers",
    "step_metrics",
]


class TrackerError(RolloutError):
    """A tracker backend is unknown, not installed, or could not start."""


class TrackersConfig(FrozenConfig):
    """Which experiment trackers a run logs to (none by default)."""

    backends: tuple[str, ...] = Field(
        default=(),
        description="Trackers to log to: tensorboard, wandb (offline unless wandb_mode: "
        "online), mlflow; empty: none.",
    )
    dir: str = Field(
        default="trackers",
        min_length=1,
        description="Where the trackers write, relative to the run directory.",
    )
    project: str = Field(
        default="aio-conductor", min_length=1, description="W&B project / MLflow experiment."
    )
    run_name: str = Field(default="", description="Run name in the tracker; empty: the run dir's.")
    wandb_mode: str = Field(
        default="offline",
        pattern="^(offline|online)$",
        description="offline: write locally (`wandb sync` later); online: upload as it runs.",
    )
    mlflow_tracking_uri: str = Field(
        default="",
        description="MLflow tracking URI; empty: a SQLite store (mlflow.db) under `dir`.",
    )


class ExperimentLogger(Protocol):
    """One tracker run. `step` is the training step (1, 2, ...)."""

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Scalars of one step (names like `rollout/t_next_s`)."""
        ...

    def log_figure(self, name: str, path: Path, step: int) -> None:
        """A PNG figure (the report's plots) under `name`."""
        ...

    def close(self) -> None:
        """Flush and end the run."""
        ...


LoggerFactory = Callable[[TrackersConfig, Path, str], ExperimentLogger]
"""(config, the tracker's own directory, run name) → a started logger."""


class TensorBoardLogger:
    """TensorBoard event files (`torch.utils.tensorboard`; needs the `tensorboard` package)."""

    def __init__(self, config: TrackersConfig, directory: Path, run_name: str) -> None:
        del config, run_name  # one event directory per run: its path names it
        writer_type = _import("torch.utils.tensorboard", "tensorboard").SummaryWriter
        self._writer = writer_type(log_dir=str(directory))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, global_step=step)

    def log_figure(self, name: str, path: Path, step: int) -> None:
        image = _png_array(path)
        self._writer.add_image(name, image, global_step=step, dataformats="HWC")

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()


class WandbLogger:
    """Weights & Biases, offline by default (files under the run directory)."""

    def __init__(self, config: TrackersConfig, directory: Path, run_name: str) -> None:
        self._wandb = _import("wandb", "wandb")
        directory.mkdir(parents=True, exist_ok=True)
        self._run = self._wandb.init(
            project=config.project,
            name=run_name,
            dir=str(directory),
            mode=config.wandb_mode,
            reinit="create_new",
        )

    @property
    def run_dir(self) -> Path:
        """The W&B run's own directory (its files, `wandb-summary.json`, the .wandb log)."""
        return Path(self._run.dir).parent

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def log_figure(self, name: str, path: Path, step: int) -> None:
        self._run.log({name: self._wandb.Image(str(path))}, step=step)

    def close(self) -> None:
        self._run.finish()


class MlflowLogger:
    """MLflow (`mlflow` or `mlflow-skinny`): metrics, and the figures as artifacts."""

    def __init__(self, config: TrackersConfig, directory: Path, run_name: str) -> None:
        mlflow = _import("mlflow", "mlflow-skinny")
        _import("sqlalchemy", "sqlalchemy alembic")  # MLflow's SQLite store (the default)
        directory.mkdir(parents=True, exist_ok=True)
        local = directory.resolve()
        uri = config.mlflow_tracking_uri or f"sqlite:///{local / 'mlflow.db'}"
        self._client = mlflow.MlflowClient(tracking_uri=uri)
        experiment = self._client.get_experiment_by_name(config.project)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self._client.create_experiment(
                config.project, artifact_location=(local / "artifacts").as_uri()
            )
        )
        self._run_id = self._client.create_run(experiment_id, run_name=run_name).info.run_id

    @property
    def run_id(self) -> str:
        return str(self._run_id)

    @property
    def client(self) -> Any:
        return self._client

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        for name, value in metrics.items():
            self._client.log_metric(self._run_id, name, float(value), step=step)

    def log_figure(self, name: str, path: Path, step: int) -> None:
        del step  # an artifact has no step
        self._client.log_artifact(self._run_id, str(path), artifact_path=f"figures/{name}")

    def close(self) -> None:
        self._client.set_terminated(self._run_id)


DEFAULT_TRACKERS: Mapping[str, LoggerFactory] = MappingProxyType(
    {"tensorboard": TensorBoardLogger, "wandb": WandbLogger, "mlflow": MlflowLogger}
)
"""The backends `TrackersConfig.backends` may name (pass `factories` to add your own)."""


def step_metrics(batch: Batch, previous_complete_s: float) -> dict[str, float]:
    """One training step's rollout figures (seconds are the run's clock)."""
    staleness = batch.staleness()
    samples = batch.trajectories
    metrics = {
        "rollout/t_next_s": batch.complete_s - previous_complete_s,
        "rollout/trainer_wait_s": batch.wait_s,
        "rollout/policy_version": float(batch.policy_version),
        "rollout/samples": float(len(samples)),
        "rollout/infra_errors": float(sum(t.infra_error is not None for t in samples)),
        "rollout/staleness_mean": sum(staleness) / len(staleness) if staleness else 0.0,
        "rollout/staleness_max": float(max(staleness, default=0)),
        "rollout/turns_mean": (
            sum(len(t.turns) for t in samples) / len(samples) if samples else 0.0
        ),
    }
    mean = batch.rewards_mean()
    if mean is not None:
        metrics["rollout/reward_mean"] = mean
    return metrics


class RunTrackers:
    """The trackers of one run (none: every call does nothing). See the module docstring."""

    def __init__(self, loggers: Sequence[ExperimentLogger]) -> None:
        self._loggers = tuple(loggers)
        self._previous_s = 0.0
        self._step = 0

    @property
    def loggers(self) -> tuple[ExperimentLogger, ...]:
        return self._loggers

    def log_step(self, batch: Batch) -> None:
        """Log one training step (call in step order); the first step's T_next counts from
        its request (the trainer asks for its first batch when the run starts)."""
        if not self._loggers:
            return
        metrics = step_metrics(batch, self._previous_s if self._step else batch.requested_s)
        self._previous_s, self._step = batch.complete_s, batch.step
        for logger in self._loggers:
            logger.log_metrics(metrics, batch.step)

    def log_figures(self, plots_dir: Path) -> None:
        """Every PNG of the report (`plots/`), at the last step logged."""
        for path in sorted(plots_dir.glob("*.png")) if self._loggers else ():
            for logger in self._loggers:
                logger.log_figure(f"report/{path.stem}", path, self._step)

    def close(self) -> None:
        for logger in self._loggers:
            logger.close()


def open_trackers(
    config: TrackersConfig,
    run_dir: Path,
    *,
    factories: Mapping[str, LoggerFactory] = DEFAULT_TRACKERS,
) -> RunTrackers:
    """Start the configured trackers for the run in `run_dir` (none: a `RunTrackers` that does
    nothing). Each backend writes in `run_dir / config.dir / <backend>`.

    Raises:
        TrackerError: an unknown backend (the message lists the known ones), or one whose
            package is missing or that could not start; the ones started are closed.
    """
    unknown = [name for name in config.backends if name not in factories]
    if unknown:
        raise TrackerError(
            f"unknown tracker {unknown[0]!r} in trackers.backends; known: {', '.join(factories)}"
        )
    run_name = config.run_name or run_dir.name
    loggers: list[ExperimentLogger] = []
    try:
        for name in config.backends:
            loggers.append(factories[name](config, run_dir / config.dir / name, run_name))
    except TrackerError:
        RunTrackers(loggers).close()
        raise
    except Exception as exc:  # a tracker's own start-up failure, named
        RunTrackers(loggers).close()
        raise TrackerError(f"tracker {name!r} could not start: {exc}") from exc
    return RunTrackers(loggers)


def _import(module: str, package: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise TrackerError(
            f"this tracker needs `{package}` (pip install {package}, or "
            "pip install 'aio-conductor[trackers]')"
        ) from exc


def _png_array(path: Path) -> Any:
    """A PNG as an HxWxC uint8 array (matplotlib reads PNG without Pillow)."""
    import numpy as np
    from matplotlib import image

    pixels = image.imread(str(path))
    if pixels.dtype != np.uint8:
        pixels = (pixels * 255).clip(0, 255).astype(np.uint8)
    return pixels
