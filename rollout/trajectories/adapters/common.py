"""A trajectory as trainers see it: the first prompt, and the response after it.

Our trajectory is one token stream (system + task prompt, then every model turn, template token
and tool observation) with a loss mask over it. Trainers want the first prompt apart and the
rest as "the response", with the mask, behaviour logprobs and policy versions on the same
response positions. `response_view` makes that split once, so every adapter aligns alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rollout.core.types import Trajectory

__all__ = ["ResponseView", "SampleStatus", "complete_groups", "response_view", "response_views"]

SampleStatus = Literal["completed", "truncated", "failed"]
"""completed: the episode ended (rewarded); truncated: cut short (turn, context or time limit),
rewarded as the env decided; failed: an infrastructure error (never trained on)."""


@dataclass(frozen=True, slots=True)
class ResponseView:
    """One sample split at its first prompt; every `response_*` tuple has one entry per
    response token. `response_mask` is 1 on model tokens and 0 on template and tool tokens;
    off the mask the logprob is 0.0 and the version `NO_VERSION`."""

    sample_id: str
    group_id: str
    prompt_index: int
    sample_index: int
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    response_mask: tuple[int, ...]
    response_logprobs: tuple[float, ...]
    response_versions: tuple[int, ...]
    reward: float | None
    status: SampleStatus
    stop_reason: str
    num_turns: int
    session_id: str
    non_generation_s: float
    """Seconds of the episode not spent generating: env start, waiting for and running tools."""

    @property
    def trajectory_tokens(self) -> tuple[int, ...]:
        return self.prompt_ids + self.response_ids


def response_view(trajectory: Trajectory) -> ResponseView:
    """Split `trajectory` at `prompt_tokens` (its prompt carries no loss-mask token)."""
    cut = trajectory.prompt_tokens
    totals = trajectory.phase_totals_s()
    return ResponseView(
        sample_id=trajectory.sample_id,
        group_id=trajectory.group_id,
        prompt_index=trajectory.prompt_index,
        sample_index=trajectory.sample_index,
        prompt_ids=trajectory.token_ids[:cut],
        response_ids=trajectory.token_ids[cut:],
        response_mask=trajectory.loss_mask[cut:],
        response_logprobs=trajectory.logprobs[cut:],
        response_versions=trajectory.versions[cut:],
        reward=trajectory.reward,
        status=sample_status(trajectory),
        stop_reason=stop_reason(trajectory),
        num_turns=len(trajectory.turns),
        session_id=str(trajectory.info.get("session_id") or trajectory.sample_id),
        non_generation_s=totals["env_init"] + totals["pre_act"] + totals["act"],
    )


def sample_status(trajectory: Trajectory) -> SampleStatus:
    if trajectory.infra_error is not None:
        return "failed"
    return "truncated" if trajectory.truncated else "completed"


def stop_reason(trajectory: Trajectory) -> str:
    """Why the sample ended: `stop` (the episode ended), `length` (the model hit its token
    limit), the agent loop's truncation reason (`max_turns`, `max_context_tokens`, ...),
    `truncated` (the env cut it) or `infra_error`."""
    if trajectory.infra_error is not None:
        return "infra_error"
    if not trajectory.truncated:
        return "stop"
    reason = trajectory.info.get("truncation_reason")
    if reason:
        return str(reason)
    if trajectory.turns and trajectory.turns[-1].finish_reason == "length":
        return "length"
    return "truncated"


def response_views(
    groups: Iterable[Sequence[Trajectory]], *, keep_failed: bool = False
) -> list[ResponseView]:
    """Every sample of `groups` in order, infrastructure failures left out unless asked for."""
    return [
        response_view(trajectory)
        for group in groups
        for trajectory in group
        if keep_failed or trajectory.infra_error is None
    ]


def complete_groups(groups: Iterable[Sequence[Trajectory]]) -> list[tuple[Trajectory, ...]]:
    """The groups none of whose samples failed: for trainers that need exactly K per prompt."""
    return [tuple(group) for group in groups if all(t.infra_error is None for t in group)]
