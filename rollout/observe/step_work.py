"""Where each training step's engine time went, by whose groups the work was for (an estimate).

A step ends when its B groups are done. The engine time before that goes to those groups, to
groups a later step consumes (pipelining: not lost, it shortens a later step), or to groups no
step of the run consumed (in flight at the end, or dropped). A scheduler that speeds T_next
either puts more of each step's time on its own groups or wastes less in all; this split says
which, per step.

Each generation request (a `gen` step event: its decoded tokens, its prompt, the part of the
prompt the cache served) is priced at its marginal cost on the cost model
(`rollout.engines.sim.cost_model`): a decoded token pays its share of a step's fixed time
(`(t_fix + t_weights) / batch`, with `batch` the mean number of requests the engine ran during
that step), `b_tok`
and `c_dec·L` for the context it reads; a prefilled token `b_c + b_tok` and its attention
`c_pf·n(p + n/2)`. A request spanning a step boundary is split in proportion to time. The
figures are estimates (the engine does not log per-request time): on the swe_like/32B runs
tried they sum to within about 15 % of each step's busy time. Pure: records in, rows out;
SIMULATED runs carry the cost model in their config.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.events import StepEvent
from rollout.engines.sim.cost_model import CostModelConfig
from rollout.observe.run_records import StepRecord

__all__ = ["StepWork", "request_cost_s", "step_work"]


@dataclass(frozen=True, slots=True)
class StepWork:
    """One step's duration and the estimated engine seconds spent in it, by whose groups."""

    step: int
    duration_s: float
    own_s: float  # on the groups this step consumed
    later_s: float  # on groups a later step consumed
    unconsumed_s: float  # on groups no step consumed (in flight at the end, or dropped)

    @property
    def own_share(self) -> float:
        total = self.own_s + self.later_s + self.unconsumed_s
        return self.own_s / total if total > 0 else 0.0


def request_cost_s(
    cost: CostModelConfig,
    *,
    decode_tokens: int,
    prompt_tokens: int,
    cached_tokens: int,
    batch: float,
) -> float:
    """Marginal engine seconds of one request (see the module docstring)."""
    prefill = max(0, prompt_tokens - cached_tokens)
    decode_context = decode_tokens * prompt_tokens + decode_tokens * (decode_tokens - 1) / 2
    per_step = (cost.t_fix_s + cost.t_weights_s) / max(batch, 1.0)
    return (
        decode_tokens * (per_step + cost.b_tok_s)
        + cost.c_dec_s * decode_context
        + prefill * (cost.b_c_s + cost.b_tok_s)
        + cost.c_pf_s * prefill * (cached_tokens + prefill / 2)
    )


def step_work(
    steps: Sequence[StepRecord],
    events: Iterable[StepEvent],
    cost: CostModelConfig,
    *,
    batches: Sequence[float],
) -> list[StepWork]:
    """The split of every step (see the module docstring); `batches[i]`: the mean requests per
    forward during step i (`request_cost_s`'s `batch`)."""
    if not steps:
        return []
    if len(batches) != len(steps):
        raise ValueError(f"one mean batch per step: {len(steps)} steps, {len(batches)} batches")
    ends = [step.t_s for step in steps]
    starts = [0.0, *ends[:-1]]
    owner = {group: index for index, step in enumerate(steps) for group in step.groups}
    spent = [[0.0, 0.0, 0.0] for _ in steps]  # own, later, unconsumed
    for event in events:
        if event.phase != "gen" or event.start_s >= ends[-1]:
            continue
        request = _request(event.data)
        for index, share in _shares(event.start_s, event.end_s, starts, ends):
            seconds = request_cost_s(cost, batch=batches[index], **request)
            consumed_by = owner.get(event.group_id)
            kind = 2 if consumed_by is None else (0 if consumed_by == index else 1)
            spent[index][kind] += seconds * share
    return [
        StepWork(step.step, ends[i] - starts[i], own, later, unconsumed)
        for i, (step, (own, later, unconsumed)) in enumerate(zip(steps, spent, strict=True))
    ]


def _request(data: Mapping[str, Any]) -> dict[str, int]:
    return {
        "decode_tokens": int(data.get("tokens", 0)),
        "prompt_tokens": int(data.get("prompt_tokens", 0)),
        "cached_tokens": int(data.get("cached_tokens", 0)),
    }


def _shares(
    start: float, end: float, starts: Sequence[float], ends: Sequence[float]
) -> list[tuple[int, float]]:
    """(step index, fraction of [start, end]) for every step window the interval overlaps,
    up to the last step's end; an instant belongs to the window it falls in."""
    first = bisect.bisect_left(ends, start) if end > start else bisect.bisect_left(ends, end)
    if first >= len(ends):
        return []
    if end <= start:
        return [(first, 1.0)]
    length = end - start
    shares = []
    for index in range(first, len(ends)):
        overlap = min(end, ends[index]) - max(start, starts[index])
        if overlap > 0:
            shares.append((index, overlap / length))
        if ends[index] >= end:
            break
    return shares
