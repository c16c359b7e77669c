"""What the rollout scheduler hears (events) and says (decisions): frozen, slotted records.

Every event carries `now_s`, the shell's clock reading, because the scheduler has no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollout.core.classes import PriorityClass
from rollout.core.priority import PriorityAssignment

__all__ = [
    "ActFinished",
    "ActStarted",
    "Decision",
    "EngineAdded",
    "EngineLoad",
    "EnginePaused",
    "EngineResumed",
    "EngineStatsUpdated",
    "GenerationAborted",
    "GenerationFinished",
    "GenerationProgress",
    "Preempt",
    "PrioritiesChanged",
    "PriorityChanged",
    "Promote",
    "SampleAdmitted",
    "SampleFinished",
    "SchedulerEvent",
    "StartGeneration",
]


# -- events -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EngineLoad:
    """What the scheduler reads of an engine's stats (the shell derives it from them)."""

    max_running_requests: int  # generation slots
    kv_headroom: float  # fraction of device KV free, 0..1 (evictable cache counts as free)
    kv_capacity_tokens: int = 0  # device KV pool (tokens); 0 = unknown (no KV residency gate)
    host_kv_capacity_tokens: int = 0  # host KV tier (tokens); 0 = none or unknown


@dataclass(frozen=True, slots=True)
class EngineAdded:
    """An engine joins with its current load; its `max_running_requests` are the slots."""

    engine: str
    load: EngineLoad
    now_s: float = 0.0


@dataclass(frozen=True, slots=True)
class EngineStatsUpdated:
    """A fresh load snapshot (slots and KV headroom). Report one after every completion."""

    engine: str
    load: EngineLoad
    now_s: float = 0.0


@dataclass(frozen=True, slots=True)
class EnginePaused:
    """The engine paused for a weight update; its in-flight generations come back aborted."""

    engine: str
    now_s: float = 0.0


@dataclass(frozen=True, slots=True)
class EngineResumed:
    engine: str
    now_s: float = 0.0


@dataclass(frozen=True, slots=True)
class SampleAdmitted:
    """A new sample of an admitted group waits for its first generation."""

    sample_id: str
    group_id: str
    now_s: float = 0.0
    context_tokens: int = 0  # its prompt (what its first generation must hold in KV)
    priority_class: PriorityClass = PriorityClass.NORMAL  # its task source's class
    source: str = ""  # its task source ('' = none): placement by shared prefix


@dataclass(frozen=True, slots=True)
class GenerationProgress:
    """Optional: `segment_tokens` generated so far by the current `generate` call."""

    sample_id: str
    segment_tokens: int
    now_s: float = 0.0


@dataclass(frozen=True, slots=True)
class GenerationFinished:
    """The model's turn ended; `episode_done` when there is no tool call to run."""

    sample_id: str
    episode_done: bool = False
    now_s: float = 0.0
    context_tokens: int = 0  # prompt + everything generated so far


@dataclass(frozen=True, slots=True)
class GenerationAborted:
    """The engine returned an aborted generation with `partial_tokens` of output (kept)."""

    sample_id: str
    partial_tokens: int = 0
    now_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ActStarted:
    """The sample's tool started running (it got an act slot and a ready container)."""

    sample_id: str
    now_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ActFinished:
    """The tool returned; `episode_done` when the env ended the episode."""

    sample_id: str
    episode_done: bool = False
    now_s: float = 0.0
    context_tokens: int = 0  # with the observation appended: what the next turn's prompt is


@dataclass(frozen=True, slots=True)
class SampleFinished:
    """The sample ended outside the normal flow (infra error, cancellation)."""

    sample_id: str
    now_s: float = 0.0


@dataclass(frozen=True, slots=True)
class PrioritiesChanged:
    """A new critical-group assignment (after a turn boundary)."""

    assignment: PriorityAssignment
    now_s: float = 0.0


SchedulerEvent = (
    EngineAdded
    | EngineStatsUpdated
    | EnginePaused
    | EngineResumed
    | SampleAdmitted
    | GenerationProgress
    | GenerationFinished
    | GenerationAborted
    | ActStarted
    | ActFinished
    | SampleFinished
    | PrioritiesChanged
)

# -- decisions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartGeneration:
    """Send the sample's prompt (plus its partial output when `resume`) to `engine`."""

    sample_id: str
    engine: str
    high: bool
    resume: bool = False


@dataclass(frozen=True, slots=True)
class Preempt:
    """Abort the sample's generation on `engine` so `for_sample_id` can have the slot."""

    sample_id: str
    engine: str
    reason: str
    for_sample_id: str


@dataclass(frozen=True, slots=True)
class PriorityChanged:
    """A live sample changed class; update its KV hint (`SET_PRIORITY`) and engine priority."""

    sample_id: str
    high: bool


@dataclass(frozen=True, slots=True)
class Promote:
    """A sample waited longer than the starvation bound and moved up one class (metrics only:
    the scheduler has already requeued it)."""

    sample_id: str
    from_class: PriorityClass
    to_class: PriorityClass
    waited_s: float  # how long it had waited in `from_class` (seconds)


Decision = StartGeneration | Preempt | PriorityChanged | Promote
