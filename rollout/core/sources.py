"""Task sources of a mixed rollout: what each source is, and which one the next group comes from.

A run may draw its groups from several task sources (a SWE task set, a short single-turn set,
an auxiliary one). Each `TaskSourceConfig` names its share of the admitted groups (`weight`),
its priority class (`rollout.core.classes`), its group size and its sampling overrides. Pure:
no I/O, no clock.

Wiring: `conductor simulate` takes sources (`SimulateConfig.sources`, each with its own
synthetic workload; configs/simulate/mixed.yaml); `conductor run` takes them too
(`RunConfig.sources`: each source's env, system prompt, chat template and tool format;
rollout/jobs/env_sources.py, configs/run/mixed.yaml).

Prompt indices stay one global space so the shell's prewarming and `Group.prompt_index` keep
working: source i owns ``[offset_i, offset_i + n_i)`` (`SourceLayout`), in config order.

`SourceMix` picks the source of each admitted group by *smooth weighted round-robin* (nginx's
upstream balancer): every pick, each source gains its weight in credit, the richest is picked
and pays the total weight back. Over any run of picks each source's count stays within one of
its exact share, and the order is a pure function of the weights (no seed, no drift).

>>> mix = SourceMix({"swe": 0.7, "short": 0.3})
>>> [mix.next()[0] for _ in range(5)]
['swe', 'short', 'swe', 'swe', 'short']
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from foundation.config import FrozenConfig
from rollout.core.classes import PriorityClass
from rollout.errors import AdmissionError

__all__ = ["SourceLayout", "SourceMix", "SourcePrompts", "TaskSourceConfig"]

_STATE_VERSION = 1


class TaskSourceConfig(FrozenConfig):
    """One task source: its share of admitted groups, class, group size and sampling."""

    name: str = Field(
        min_length=1,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Unique name; recorded as each trajectory's info['source'] and Group.source.",
    )
    weight: float = Field(
        default=1.0,
        gt=0.0,
        description="Share of admitted groups, relative to the other sources' weights "
        "(0.7 and 0.3 give 70 % / 30 % of the groups, exact over any window up to one group).",
    )
    priority_class: PriorityClass = Field(
        default=PriorityClass.NORMAL,
        description="Scheduling class of the source's samples (urgent > high > normal > low).",
    )
    group_size: int | None = Field(
        default=None,
        ge=1,
        description="K of this source's groups; None = the run's admission.group_size (samples).",
    )
    temperature: float | None = Field(
        default=None, ge=0.0, description="Sampling temperature; None = the agent loop's."
    )
    top_p: float | None = Field(
        default=None, gt=0.0, le=1.0, description="Nucleus sampling mass; None = the agent loop's."
    )
    max_new_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Generated tokens per turn; None = the agent loop's (tokens).",
    )

    def sampling_overrides(self) -> dict[str, Any]:
        """The agent-loop fields this source sets (the ones not None)."""
        values = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
        }
        return {key: value for key, value in values.items() if value is not None}


@dataclass(frozen=True, slots=True)
class SourcePrompts:
    """A source and how many prompts it holds."""

    config: TaskSourceConfig
    num_prompts: int


@dataclass(frozen=True, slots=True)
class SourceLayout:
    """Where each source's prompts sit in the global prompt index space."""

    sources: tuple[SourcePrompts, ...]
    offsets: tuple[int, ...]

    @classmethod
    def of(cls, sources: Sequence[SourcePrompts]) -> SourceLayout:
        """Lay `sources` out in order; raises `AdmissionError` on a bad set."""
        if not sources:
            raise AdmissionError("a source layout needs at least one source")
        names = [source.config.name for source in sources]
        if len(set(names)) != len(names):
            raise AdmissionError(f"task source names repeat: {names}")
        offsets = []
        total = 0
        for source in sources:
            if source.num_prompts < 1:
                raise AdmissionError(
                    f"task source {source.config.name!r} is empty (num_prompts="
                    f"{source.num_prompts})"
                )
            offsets.append(total)
            total += source.num_prompts
        return cls(tuple(sources), tuple(offsets))

    @property
    def num_prompts(self) -> int:
        return self.offsets[-1] + self.sources[-1].num_prompts

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(source.config.name for source in self.sources)

    def position(self, name: str) -> int:
        """The index of source `name` (KeyError-free: raises `AdmissionError`)."""
        try:
            return self.names.index(name)
        except ValueError:
            raise AdmissionError(f"unknown task source {name!r}; known: {self.names}") from None

    def locate(self, prompt_index: int) -> tuple[str, int]:
        """(source name, its local prompt index) of a global prompt index."""
        for source, offset in zip(reversed(self.sources), reversed(self.offsets), strict=True):
            if offset <= prompt_index < offset + source.num_prompts:
                return source.config.name, prompt_index - offset
        raise AdmissionError(f"prompt index {prompt_index} is outside 0..{self.num_prompts - 1}")


class SourceMix:
    """Smooth weighted round-robin over named sources; see the module docstring."""

    def __init__(self, weights: Mapping[str, float]) -> None:
        if not weights:
            raise AdmissionError("a source mix needs at least one source")
        bad = {name: weight for name, weight in weights.items() if not weight > 0}
        if bad:
            raise AdmissionError(f"source weights must be > 0, got {bad}")
        self._weights = dict(weights)
        self._credit = dict.fromkeys(weights, 0.0)
        self._picks = dict.fromkeys(weights, 0)

    @property
    def picks(self) -> Mapping[str, int]:
        """How many times each source was picked."""
        return dict(self._picks)

    def next(self, eligible: Collection[str] | None = None) -> tuple[str, int]:
        """Pick the next source (only among `eligible`, default all); returns (name, its pick
        count before this one)."""
        names = [n for n in self._weights if eligible is None or n in eligible]
        if not names:
            raise AdmissionError("no task source is eligible (all exhausted)")
        total = 0.0
        for name in names:
            self._credit[name] += self._weights[name]
            total += self._weights[name]
        best = max(names, key=lambda name: self._credit[name])  # first on ties: config order
        self._credit[best] -= total
        count = self._picks[best]
        self._picks[best] = count + 1
        return best, count

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": _STATE_VERSION,
            "credit": dict(self._credit),
            "picks": dict(self._picks),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("version") != _STATE_VERSION or set(state["credit"]) != set(self._weights):
            raise AdmissionError(
                f"source mix state does not match sources {sorted(self._weights)}: {state!r}"
            )
        self._credit = {name: float(state["credit"][name]) for name in self._weights}
        self._picks = {name: int(state["picks"][name]) for name in self._weights}
