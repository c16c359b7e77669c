"""The rollout data model: the sample state machine, groups, turns and exact-token trajectories.

A *group* is K samples of one prompt (a GRPO group; K=1 for PPO). A *sample* lives through the
state machine below; `LEGAL_TRANSITIONS` is the whole table and `Sample.advance` refuses any
other edge at once::

    ADMITTED ─► WAIT_GEN ─► GEN ─► WAIT_ACT ─► ACT ─► WAIT_GEN ─► … ─► DONE ─► REWARDED
                             │ ▲
                             ▼ │
                  PREEMPTED / INTERRUPTED   (aborted mid-generation; partial output kept)

Every live state may also go to DONE: the episode ended (a final answer, a step or context
limit, or an infrastructure error recorded as `infra_error`).

A *trajectory* is what the trainer gets: the exact token ids the engine consumed and produced
(never re-tokenized), with four arrays aligned one-to-one with `token_ids`: the loss mask (1 on
model-generated tokens only), the behaviour logprob and the policy version of each generated
token (`0.0` and `NO_VERSION` elsewhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field, fields, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import numpy as np

from rollout.errors import IllegalTransitionError, TrajectoryError

__all__ = [
    "LEGAL_TRANSITIONS",
    "NO_VERSION",
    "Group",
    "Sample",
    "SampleProgress",
    "SampleState",
    "Trajectory",
    "Turn",
    "check_transition",
    "group_id_of",
    "make_sample_id",
]

NO_VERSION = -1
"""Policy version recorded for tokens the model did not generate (prompt, template, tool output)."""


class SampleState(StrEnum):
    """Where a sample is in its life (DESIGN.md §3, action-level agent loop)."""

    ADMITTED = "admitted"  # its group was admitted; the env may still be starting
    WAIT_GEN = "wait_gen"  # queued for a generation slot (new, or back from the env)
    GEN = "gen"  # holds a generation slot
    WAIT_ACT = "wait_act"  # the model called a tool; waits for an act slot / a ready container
    ACT = "act"  # its tool runs in the env
    PREEMPTED = "preempted"  # aborted by the scheduler for a critical sample; partial output kept
    INTERRUPTED = "interrupted"  # aborted by a weight update (engine pause); partial output kept
    DONE = "done"  # the episode ended; waiting for its reward
    REWARDED = "rewarded"  # reward attached; the sample is finished


_S = SampleState

LEGAL_TRANSITIONS: Mapping[SampleState, frozenset[SampleState]] = MappingProxyType(
    {
        _S.ADMITTED: frozenset({_S.WAIT_GEN, _S.DONE}),
        _S.WAIT_GEN: frozenset({_S.GEN, _S.DONE}),
        _S.GEN: frozenset({_S.WAIT_ACT, _S.PREEMPTED, _S.INTERRUPTED, _S.DONE}),
        # An aborted sample resumes straight into a generation slot: it waits in its own state so
        # the scheduler can tell "resume a partial turn" from "start a turn".
        _S.PREEMPTED: frozenset({_S.GEN, _S.DONE}),
        _S.INTERRUPTED: frozenset({_S.GEN, _S.DONE}),
        _S.WAIT_ACT: frozenset({_S.ACT, _S.DONE}),
        _S.ACT: frozenset({_S.WAIT_GEN, _S.DONE}),
        _S.DONE: frozenset({_S.REWARDED}),
        _S.REWARDED: frozenset(),
    }
)
"""The complete transition table: `LEGAL_TRANSITIONS[current]` holds every allowed next state."""


def check_transition(current: SampleState, target: SampleState) -> None:
    """Raise `IllegalTransitionError` unless `current → target` is in the table."""
    allowed = LEGAL_TRANSITIONS[current]
    if target not in allowed:
        options = ", ".join(sorted(str(state) for state in allowed)) or "none (terminal)"
        raise IllegalTransitionError(
            f"a sample in state {current} cannot go to {target}; allowed next states: {options}. "
            "This is a bug in the caller's event order."
        )


def make_sample_id(group_id: str, attempt: int, index: int) -> str:
    """The id of sample `index` of `group_id`; `attempt` > 0 after a restart re-admitted it."""
    return f"{group_id}-a{attempt}-s{index}"


def group_id_of(sample_id: str) -> str:
    """The group id `make_sample_id` put in `sample_id` (ValueError for another shape)."""
    head, sep, index = sample_id.rpartition("-s")
    group_id, mark, attempt = head.rpartition("-a")
    if not sep or not mark or not group_id or not index.isdigit() or not attempt.isdigit():
        raise ValueError(f"{sample_id!r} is not a sample id (GROUP-aATTEMPT-sINDEX)")
    return group_id


def sample_index_of(sample_id: str) -> int:
    """The index `make_sample_id` put in `sample_id` (ValueError for another shape)."""
    head, sep, index = sample_id.rpartition("-s")
    if not sep or not head or not index.isdigit():
        raise ValueError(f"{sample_id!r} is not a sample id (GROUP-aATTEMPT-sINDEX)")
    return int(index)


@dataclass(slots=True)
class Sample:
    """One sample's position in the state machine, with the counters its transitions imply."""

    sample_id: str
    group_id: str
    index: int = 0
    state: SampleState = SampleState.ADMITTED
    preemptions: int = 0
    interruptions: int = 0

    def advance(self, target: SampleState) -> None:
        """Move to `target`; raises `IllegalTransitionError` for an edge not in the table."""
        try:
            check_transition(self.state, target)
        except IllegalTransitionError as exc:
            raise IllegalTransitionError(f"sample {self.sample_id}: {exc}") from None
        if target is SampleState.PREEMPTED:
            self.preemptions += 1
        elif target is SampleState.INTERRUPTED:
            self.interruptions += 1
        self.state = target

    @property
    def is_finished(self) -> bool:
        """True once the episode has ended (DONE or REWARDED)."""
        return self.state in (SampleState.DONE, SampleState.REWARDED)


@dataclass(frozen=True, slots=True)
class SampleProgress:
    """A live sample at a turn boundary (what the length predictor reads)."""

    sample_id: str
    group_id: str
    turns_done: int
    gen_tokens: int
    context_tokens: int
    obs_tokens: int


@dataclass(frozen=True, slots=True)
class Group:
    """K samples of one prompt, admitted together at a training step."""

    group_id: str
    prompt_index: int
    size: int
    admitted_step: int
    attempt: int = 0
    source: str = ""  # the task source it was drawn from ('' = the run's only source)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"group {self.group_id}: size must be >= 1, got {self.size}")

    def sample_ids(self) -> tuple[str, ...]:
        """The ids of its samples, in index order."""
        return tuple(make_sample_id(self.group_id, self.attempt, i) for i in range(self.size))


@dataclass(frozen=True, slots=True)
class Turn:
    """One model turn and the tool call that followed it.

    Token spans are half-open offsets into the trajectory's `token_ids`: `gen_start:gen_end` are
    the model's tokens of this turn (all of them, across preemptions and resumptions),
    `obs_start:obs_end` the tool observation appended after it (empty when the episode ended).
    Times are seconds: `pre_gen_s` queueing + KV reload before the first token, `gen_s` generating,
    `pre_act_s` waiting for an act slot or a ready container, `act_s` the tool running.
    """

    index: int
    gen_start: int
    gen_end: int
    obs_start: int = 0
    obs_end: int = 0
    finish_reason: str = "stop"
    tool_name: str | None = None
    tool_result: str | None = None
    pre_gen_s: float = 0.0
    gen_s: float = 0.0
    pre_act_s: float = 0.0
    act_s: float = 0.0
    preemptions: int = 0
    interruptions: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {name: getattr(self, name) for name in _TURN_FIELDS}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Turn:
        """Inverse of `to_dict`."""
        return cls(**{name: record[name] for name in _TURN_FIELDS if name in record})


_TURN_FIELDS = tuple(Turn.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class Trajectory:
    """The exact token-level record of one finished sample. Invariants are checked on creation.

    `prompt_tokens` is the length of the initial prompt (system + task); everything after it is
    the response (model turns, template tokens, tool observations). `infra_error` is None unless
    the infrastructure failed (dead container, engine crash); such a sample is excluded from
    training, never trained on as reward 0.
    """

    sample_id: str
    group_id: str
    prompt_index: int
    sample_index: int
    token_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    versions: tuple[int, ...]
    prompt_tokens: int
    turns: tuple[Turn, ...] = ()
    reward: float | None = None
    terminated: bool = False
    truncated: bool = False
    infra_error: str | None = None
    env_init_s: float = 0.0
    num_preemptions: int = 0
    num_interruptions: int = 0
    admitted_step: int = 0
    attempt: int = 0
    info: Mapping[str, Any] = field(default_factory=dict)
    # Not a field. False skips the per-token checks (O(tokens)) for a record that is correct
    # by construction: `TrajectoryBuilder` validates every segment as it is appended. The
    # structural checks still run; `dataclasses.replace` and `from_record` check everything.
    check_tokens: InitVar[bool] = True

    def __post_init__(self, check_tokens: bool) -> None:
        _check_trajectory(self, check_tokens=check_tokens)

    @property
    def num_generated_tokens(self) -> int:
        """How many tokens the model produced (the loss-mask sum)."""
        return sum(self.loss_mask)

    @property
    def is_trainable(self) -> bool:
        """True when the sample has a reward and no infrastructure error."""
        return self.infra_error is None and self.reward is not None

    def phase_totals_s(self) -> dict[str, float]:
        """Seconds spent per phase over the whole episode (env_init, pre_gen, gen, pre_act, act)."""
        totals = {
            "env_init": self.env_init_s,
            "pre_gen": 0.0,
            "gen": 0.0,
            "pre_act": 0.0,
            "act": 0.0,
        }
        for turn in self.turns:
            totals["pre_gen"] += turn.pre_gen_s
            totals["gen"] += turn.gen_s
            totals["pre_act"] += turn.pre_act_s
            totals["act"] += turn.act_s
        return totals

    def with_reward(self, reward: float) -> Trajectory:
        """A copy with `reward` set (the DONE → REWARDED step)."""
        return replace(self, reward=reward)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict(to_dict(t)) == t`."""
        record: dict[str, Any] = {}
        for name in _TRAJECTORY_FIELDS:
            value = getattr(self, name)
            if name == "turns":
                value = [turn.to_dict() for turn in value]
            elif name == "info":
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            record[name] = value
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Trajectory:
        """Rebuild a trajectory from `to_dict` output; raises `TrajectoryError` if malformed."""
        try:
            return cls(
                sample_id=str(record["sample_id"]),
                group_id=str(record["group_id"]),
                prompt_index=int(record["prompt_index"]),
                sample_index=int(record["sample_index"]),
                token_ids=tuple(map(int, record["token_ids"])),
                loss_mask=tuple(map(int, record["loss_mask"])),
                logprobs=tuple(map(float, record["logprobs"])),
                versions=tuple(map(int, record["versions"])),
                prompt_tokens=int(record["prompt_tokens"]),
                turns=tuple(Turn.from_dict(turn) for turn in record.get("turns", ())),
                reward=None if record.get("reward") is None else float(record["reward"]),
                terminated=bool(record.get("terminated", False)),
                truncated=bool(record.get("truncated", False)),
                infra_error=record.get("infra_error"),
                env_init_s=float(record.get("env_init_s", 0.0)),
                num_preemptions=int(record.get("num_preemptions", 0)),
                num_interruptions=int(record.get("num_interruptions", 0)),
                admitted_step=int(record.get("admitted_step", 0)),
                attempt=int(record.get("attempt", 0)),
                info=dict(record.get("info") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, TrajectoryError):
                raise
            raise TrajectoryError(f"malformed trajectory record: {exc!r}") from exc


_TRAJECTORY_FIELDS = tuple(field.name for field in fields(Trajectory))


def _check_trajectory(trajectory: Trajectory, *, check_tokens: bool = True) -> None:
    """Raise `TrajectoryError` if the aligned arrays, the mask or the turn spans disagree
    (`check_tokens=False`: lengths and turn order only)."""
    name = trajectory.sample_id
    length = len(trajectory.token_ids)
    for label, values in (
        ("loss_mask", trajectory.loss_mask),
        ("logprobs", trajectory.logprobs),
        ("versions", trajectory.versions),
    ):
        if len(values) != length:
            raise TrajectoryError(
                f"trajectory {name}: {label} has {len(values)} entries but there are {length} "
                "tokens; every per-token array must be aligned with token_ids"
            )
    if not 0 <= trajectory.prompt_tokens <= length:
        raise TrajectoryError(
            f"trajectory {name}: prompt_tokens={trajectory.prompt_tokens} outside 0..{length}"
        )
    # Vectorised (trajectories hold tens of thousands of tokens); the message names the first
    # offending position, found only once a violation is known.
    if not check_tokens:
        _check_turn_spans(trajectory, check_tokens=False)
        return
    if not set(trajectory.loss_mask) <= {0, 1}:
        position = next(i for i, m in enumerate(trajectory.loss_mask) if m not in (0, 1))
        raise TrajectoryError(
            f"trajectory {name}: loss_mask[{position}]={trajectory.loss_mask[position]} is not 0/1"
        )
    # fromiter with a known dtype and count: half the time of asarray's type discovery.
    mask = np.fromiter(trajectory.loss_mask, dtype=np.int8, count=length)
    logprobs = np.fromiter(trajectory.logprobs, dtype=np.float64, count=length)
    versions = np.fromiter(trajectory.versions, dtype=np.int64, count=length)
    positions = np.arange(length)
    bad_generated = (mask == 1) & ((versions < 0) | (positions < trajectory.prompt_tokens))
    bad_other = (mask == 0) & ((versions != NO_VERSION) | (logprobs != 0.0))
    if bad_generated.any():
        position = int(np.argmax(bad_generated))
        raise TrajectoryError(
            f"trajectory {name}: token {position} is marked as generated but has "
            f"version {trajectory.versions[position]} (or lies in the prompt); generated tokens "
            "need a version"
        )
    if bad_other.any():
        position = int(np.argmax(bad_other))
        raise TrajectoryError(
            f"trajectory {name}: token {position} is not generated but carries version "
            f"{trajectory.versions[position]} / logprob {trajectory.logprobs[position]}; use "
            f"{NO_VERSION} and 0.0"
        )
    _check_turn_spans(trajectory)


def _check_turn_spans(trajectory: Trajectory, *, check_tokens: bool = True) -> None:
    """Turns must be in order, inside the token range, and generation spans all model tokens."""
    length = len(trajectory.token_ids)
    previous_end = trajectory.prompt_tokens
    for turn in trajectory.turns:
        if not previous_end <= turn.gen_start <= turn.gen_end <= length:
            raise TrajectoryError(
                f"trajectory {trajectory.sample_id}: turn {turn.index} span "
                f"{turn.gen_start}:{turn.gen_end} is out of order or out of range"
            )
        if check_tokens and 0 in trajectory.loss_mask[turn.gen_start : turn.gen_end]:
            raise TrajectoryError(
                f"trajectory {trajectory.sample_id}: turn {turn.index} generation span holds "
                "tokens with loss_mask 0; the span must cover model tokens only"
            )
        if turn.obs_end > turn.obs_start:
            if not turn.gen_end <= turn.obs_start <= turn.obs_end <= length:
                raise TrajectoryError(
                    f"trajectory {trajectory.sample_id}: turn {turn.index} observation span "
                    f"{turn.obs_start}:{turn.obs_end} must follow its generation span"
                )
            previous_end = turn.obs_end
        else:
            previous_end = turn.gen_end
