"""The typed per-line records of a run directory: training steps, engine samples, step events.

`StepRecord` is one line of steps.jsonl, `TimeseriesSample` one line of timeseries.jsonl, and
`event_from_dict` reads one line of events.jsonl back into a `StepEvent`. Each `from_dict`
raises `RunDirError` naming the missing or bad field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.events import Phase, StepEvent
from rollout.errors import RolloutError

__all__ = [
    "MissingRunFileError",
    "RunDirError",
    "StepRecord",
    "TimeseriesSample",
    "event_from_dict",
]


class RunDirError(RolloutError, ValueError):
    """A run-directory file is malformed, or holds records that contradict each other."""


class MissingRunFileError(RunDirError, FileNotFoundError):
    """A file the caller needs is not in the run directory."""


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One training step: the conductor handed `groups` to the trainer, complete at `t_s`.

    `staleness[i]` is how many steps off-policy `groups[i]` is (0 = on-policy), in group order.
    `rewards_mean` is the mean reward of the batch's trainable samples (None if it has none).
    `deadline` is how a step with a wall-clock budget went (`rollout.core.deadline.StepDeadline`
    as a dict: hit, truncated, cancelled, groups vs wanted, short); None (and absent from the
    line) without a budget. `held_sample_s` is the step's sample-seconds that samples ready to
    generate waited at the conductor, by what held them (`rollout.core.held_samples`); None (and
    absent) when the run did not record it.
    """

    step: int
    t_s: float
    groups: tuple[str, ...]
    policy_version: int = 0
    staleness: tuple[int, ...] = ()
    rewards_mean: float | None = None
    deadline: Mapping[str, Any] | None = None
    held_sample_s: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if self.step < 1:
            raise RunDirError(f"step {self.step}: training steps are numbered from 1")
        if not math.isfinite(self.t_s):
            raise RunDirError(f"step {self.step}: t_s={self.t_s} is not a finite time")
        if self.staleness and len(self.staleness) != len(self.groups):
            raise RunDirError(
                f"step {self.step}: {len(self.staleness)} staleness values for "
                f"{len(self.groups)} groups; write one staleness per group, in group order"
            )
        if any(value < 0 for value in self.staleness):
            raise RunDirError(f"step {self.step}: negative staleness {list(self.staleness)}")

    def to_dict(self) -> dict[str, Any]:
        """The steps.jsonl line."""
        line: dict[str, Any] = {
            "step": self.step,
            "t_s": self.t_s,
            "groups": list(self.groups),
            "policy_version": self.policy_version,
            "staleness": list(self.staleness),
            "rewards_mean": self.rewards_mean,
        }
        if self.deadline is not None:
            line["deadline"] = dict(self.deadline)
        if self.held_sample_s is not None:
            line["held_sample_s"] = dict(self.held_sample_s)
        return line

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> StepRecord:
        """Inverse of `to_dict`; raises `RunDirError` naming a missing or bad field."""
        try:
            rewards = record.get("rewards_mean")
            return cls(
                step=int(record["step"]),
                t_s=float(record["t_s"]),
                groups=tuple(str(group) for group in record["groups"]),
                policy_version=int(record.get("policy_version", 0)),
                staleness=tuple(int(value) for value in record.get("staleness") or ()),
                rewards_mean=None if rewards is None else float(rewards),
                deadline=_deadline_from(record.get("deadline")),
                held_sample_s=_held_from(record.get("held_sample_s")),
            )
        except KeyError as exc:
            raise RunDirError(f"a step record lacks the field {exc.args[0]!r}") from exc
        except (TypeError, ValueError) as exc:
            if isinstance(exc, RunDirError):
                raise
            raise RunDirError(f"a step record has a bad value: {exc}") from exc


def _held_from(value: Any) -> Mapping[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise RunDirError(f"a step record's held_sample_s must be a mapping, got {value!r}")
    return {str(reason): float(seconds) for reason, seconds in value.items()}


def _deadline_from(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise RunDirError(f"a step record's deadline must be a mapping, got {value!r}")
    return dict(value)


_SAMPLE_FIELDS = (
    "running",
    "waiting",
    "max_running",
    "busy",
    "kv_used_tokens",
    "kv_capacity_tokens",
    "kv_device_hits",
    "kv_host_hits",
    "kv_misses",
    "recomputed_tokens",
)


@dataclass(frozen=True, slots=True)
class TimeseriesSample:
    """One engine's state at `t_s`, sampled by the conductor every sample interval.

    `busy` is 1/0 (busy right now) or the fraction of the last interval the engine was busy;
    None when the engine reports no busy time (an SGLang server without `/metrics`).
    The hit/miss/recomputed counters are cumulative token counts since the run started: hits
    are prefix tokens found on the device or host tier, misses prefix tokens that had to be
    computed. `extra` keeps any other numeric keys the engine reports.
    """

    t_s: float
    engine: str
    running: int
    waiting: int
    max_running: int
    busy: float | None
    kv_used_tokens: float
    kv_capacity_tokens: float
    kv_device_hits: float
    kv_host_hits: float
    kv_misses: float
    recomputed_tokens: float
    extra: Mapping[str, float] = field(default_factory=dict)

    @property
    def kv_occupancy(self) -> float | None:
        """Fraction of device KV in use, or None for an engine without a KV capacity."""
        if self.kv_capacity_tokens <= 0:
            return None
        return self.kv_used_tokens / self.kv_capacity_tokens

    def to_dict(self) -> dict[str, Any]:
        """The timeseries.jsonl line (extra keys are written at the top level)."""
        record: dict[str, Any] = {"t_s": self.t_s, "engine": self.engine}
        record.update({name: getattr(self, name) for name in _SAMPLE_FIELDS})
        record.update(self.extra)
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> TimeseriesSample:
        """Inverse of `to_dict`; non-numeric extra keys are dropped."""
        missing = [name for name in ("t_s", "engine", *_SAMPLE_FIELDS) if name not in record]
        if missing:
            raise RunDirError(
                f"a timeseries sample lacks {missing}; every sample must carry t_s, engine and "
                f"{', '.join(_SAMPLE_FIELDS)} (write 0 for a counter the engine does not have)"
            )
        known = {"t_s", "engine", *_SAMPLE_FIELDS}
        extra = {
            key: float(value)
            for key, value in record.items()
            if key not in known and isinstance(value, int | float) and not isinstance(value, bool)
        }
        try:
            return cls(
                t_s=float(record["t_s"]),
                engine=str(record["engine"]),
                running=int(record["running"]),
                waiting=int(record["waiting"]),
                max_running=int(record["max_running"]),
                busy=None if record["busy"] is None else float(record["busy"]),
                kv_used_tokens=float(record["kv_used_tokens"]),
                kv_capacity_tokens=float(record["kv_capacity_tokens"]),
                kv_device_hits=float(record["kv_device_hits"]),
                kv_host_hits=float(record["kv_host_hits"]),
                kv_misses=float(record["kv_misses"]),
                recomputed_tokens=float(record["recomputed_tokens"]),
                extra=extra,
            )
        except (TypeError, ValueError) as exc:
            raise RunDirError(f"a timeseries sample has a bad value: {exc}") from exc


def event_from_dict(record: Mapping[str, Any]) -> StepEvent:
    """Inverse of `StepEvent.to_dict`; raises `RunDirError` for an unknown phase or bad field."""
    try:
        phase = Phase(record["phase"])
    except ValueError as exc:
        known = ", ".join(str(phase) for phase in Phase)
        raise RunDirError(f"unknown phase {record['phase']!r}; known phases: {known}") from exc
    except KeyError as exc:
        raise RunDirError("an event record lacks the field 'phase'") from exc
    try:
        return StepEvent(
            phase=phase,
            start_s=float(record["start_s"]),
            end_s=float(record["end_s"]),
            sample_id=str(record.get("sample_id", "")),
            group_id=str(record.get("group_id", "")),
            data=dict(record.get("data") or {}),
        )
    except KeyError as exc:
        raise RunDirError(f"an event record lacks the field {exc.args[0]!r}") from exc
    except (TypeError, ValueError) as exc:
        raise RunDirError(f"an event record has a bad value: {exc}") from exc
