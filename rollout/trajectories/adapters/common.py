"""A trajectory as trainers see it: the first prompt, and the response after it.

Our trajectory is one token stream (system + task prompt, then every model turn, template token
and tool observation) with a loss mask over it. Trainers want the first prompt apart and the
rest as "the response", with the mask, behaviour logprobs and policy versions on the same
response positions. `response_view` makes that split once, so every adapter aligns alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from rollout.core.types import NO_VERSION, Trajectory

__all__ = [
    "ResponseView",
    "SampleStatus",
    "complete_groups",
    "every_row_views",
    "response_view",
    "response_views",
]

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
    generation_s: float = 0.0
    """Seconds the episode spent generating (its turns' `gen` phases)."""
    tool_s: float = 0.0
    """Seconds the episode's tools ran (its turns' `act` phases)."""

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
        generation_s=totals["gen"],
        tool_s=totals["act"],
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


def every_row_views(
    groups: Iterable[Sequence[Trajectory]], *, filler_id: int | None = None
) -> list[ResponseView]:
    """Every sample of `groups` in order, one row each, for trainers that need one row per
    sample they asked for (verl's `batch.union`, SkyRL's `validate_generator_output`).

    A sample lost to an infrastructure error stays as a row nothing is learnt from: its loss
    mask is all 0 (logprobs 0.0), its status `failed`, and its reward the mean of its group's
    live samples (0.0 when none ran), so the group's mean reward -- GRPO's baseline -- is that
    of the samples that ran. A failed row with no response tokens gets one `filler_id`
    (masked) when given, so no row is empty.
    """
    rows: list[ResponseView] = []
    for group in groups:
        live = [t.reward or 0.0 for t in group if t.infra_error is None]
        baseline = sum(live) / len(live) if live else 0.0
        for trajectory in group:
            view = response_view(trajectory)
            if trajectory.infra_error is not None:
                view = _masked(view, baseline, filler_id)
            rows.append(view)
    return rows


def _masked(view: ResponseView, reward: float, filler_id: int | None) -> ResponseView:
    ids = view.response_ids
    if not ids and filler_id is not None:
        ids = (filler_id,)
    return replace(
        view,
        response_ids=ids,
        response_mask=(0,) * len(ids),
        response_logprobs=(0.0,) * len(ids),
        response_versions=(NO_VERSION,) * len(ids),
        reward=reward,
    )
