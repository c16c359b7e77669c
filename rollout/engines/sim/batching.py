"""Pure batching decisions of the simulated engine, after SGLang's scheduler (sglang.md §2).

No I/O, no clock, no asyncio: numbers and small views in, decisions out. The batch state
(`batcher.py`) applies them. Covers the admission budget (`new_token_ratio` estimate), the
retraction order, priority-preemption victims, and the planning of a multi-step decode block
that stops exactly where the batch could change.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from rollout.engines.sim.config import RetractionPolicy, SimEngineConfig
from rollout.engines.sim.cost_model import CostModelConfig, decode_step_cost

__all__ = [
    "AdmissionWatch",
    "DecodeBlock",
    "RunningView",
    "admission_need",
    "decayed_ratio",
    "decode_reserve_tokens",
    "plan_decode_block",
    "preemption_victims",
    "retraction_order",
    "steps_done_by",
]


@dataclass(frozen=True, slots=True)
class RunningView:
    """What the decisions need to know about one running request."""

    index: int  # position in the caller's list, returned in decisions
    seq: int  # arrival order (smaller is older)
    priority: int
    input_tokens: int
    output_tokens: int
    kv_tokens: int  # KV this request holds (freed or made evictable if it leaves)


def decayed_ratio(config: SimEngineConfig, ratio: float, steps: int) -> float:
    """`new_token_ratio` after `steps` decode steps of linear decay to its floor."""
    decay = (config.init_new_token_ratio - config.min_new_token_ratio) / (
        config.new_token_ratio_decay_steps
    )
    return max(config.min_new_token_ratio, ratio - decay * steps)


def decode_reserve_tokens(ratio: float, remaining_new_tokens: Sequence[int], clip: int) -> float:
    """KV the admission budget keeps for running requests' future decode (SGLang PrefillAdder)."""
    return ratio * sum(min(remaining, clip) for remaining in remaining_new_tokens)


def admission_need(load_tokens: int, prefill_tokens: int, remaining_new: int, clip: int) -> int:
    """KV a new request needs to be admitted: its load-back, its prefill and its clipped decode."""
    return load_tokens + prefill_tokens + min(remaining_new, clip)


def retraction_order(policy: RetractionPolicy, running: Sequence[RunningView]) -> list[int]:
    """Indices of running requests, the first to retract first.

    LENGTH: fewest output tokens first, ties by longest input (SGLang `retract_decode`);
    PRIORITY: lowest priority first, then as LENGTH.
    """
    if policy is RetractionPolicy.PRIORITY:
        ordered = sorted(running, key=lambda r: (r.priority, r.output_tokens, -r.input_tokens))
    else:
        ordered = sorted(running, key=lambda r: (r.output_tokens, -r.input_tokens, -r.seq))
    return [view.index for view in ordered]


def preemption_victims(
    running: Sequence[RunningView],
    priority: int,
    threshold: int,
    need_tokens: int,
    need_slot: bool,
) -> list[int]:
    """Running requests to preempt so a waiting request of `priority` fits, or [] if none can.

    Candidates are beaten by more than `threshold`, lowest priority first, newest first within a
    priority (SGLang `preempt_to_schedule`). All-or-nothing: if the candidates cannot cover
    `need_tokens` (and a slot when `need_slot`), nothing is preempted.
    """
    candidates = sorted(
        (view for view in running if priority - view.priority > threshold),
        key=lambda view: (view.priority, -view.seq),
    )
    chosen: list[int] = []
    freed = 0
    for view in candidates:
        if freed >= need_tokens and (chosen or not need_slot):
            break
        chosen.append(view.index)
        freed += view.kv_tokens
    if freed < need_tokens or (need_slot and not chosen):
        return []
    return chosen


class AdmissionWatch:
    """Tells after how many decode steps a blocked waiting request would pass admission.

    Admission (SGLang `PrefillAdder`) passes when `need + reserve(t) < available(t)`, with
    `available(t) = available_0 - batch·t` (each step allocates one token per request) and
    `reserve(t) = ratio(t)·Σ min(remaining_r - t, clip) + fixed_reserve`. Query `admits_after`
    with increasing step counts; each call is O(1) amortised.
    """

    def __init__(
        self,
        config: SimEngineConfig,
        *,
        need_tokens: int,
        available_tokens: int,
        remaining_new_tokens: Sequence[int],
        fixed_reserve_tokens: float,
        ratio: float,
    ) -> None:
        self._config = config
        self._need = need_tokens
        self._available = available_tokens
        self._fixed = fixed_reserve_tokens
        self._ratio = ratio
        self._clip = config.clip_max_new_tokens
        self._remaining = sorted(remaining_new_tokens)
        self._batch = len(self._remaining)
        self._unclipped = 0  # requests whose remaining - t is below clip
        self._unclipped_sum = 0

    def admits_after(self, steps: int) -> bool:
        clip = self._clip
        while self._unclipped < self._batch and self._remaining[self._unclipped] - steps < clip:
            self._unclipped_sum += self._remaining[self._unclipped]
            self._unclipped += 1
        clipped_sum = (self._batch - self._unclipped) * clip
        unclipped_sum = self._unclipped_sum - self._unclipped * steps
        reserve = (
            decayed_ratio(self._config, self._ratio, steps) * (clipped_sum + max(0, unclipped_sum))
            + self._fixed
        )
        return self._need + reserve < self._available - self._batch * steps


@dataclass(frozen=True, slots=True)
class DecodeBlock:
    """Planned decode steps: their end times, and whether admission passes after the last."""

    step_ends_s: list[float]
    admits_after_last: bool


def plan_decode_block(
    cost: CostModelConfig,
    *,
    start_s: float,
    batch: int,
    context_tokens: int,
    max_steps: int,
    stop_at_s: float | None = None,
    watch: AdmissionWatch | None = None,
) -> DecodeBlock:
    """Up to `max_steps` decode steps of an unchanging batch.

    Each step reads the batch's whole KV (which grows by `batch` tokens per step). The block ends
    early after the first step that ends at or past `stop_at_s` (a transfer lands) or after
    which `watch` says a waiting request would be admitted: the batch changes there.
    """
    ends: list[float] = []
    now = start_s
    context = context_tokens
    fixed_s, per_kv_token_s = decode_step_cost(cost, batch)  # = decode_step_time_s, per step
    for step in range(1, max_steps + 1):
        now += fixed_s + per_kv_token_s * context
        context += batch
        ends.append(now)
        if watch is not None and watch.admits_after(step):
            return DecodeBlock(ends, admits_after_last=True)
        if stop_at_s is not None and now >= stop_at_s:
            break
    return DecodeBlock(ends, admits_after_last=False)


def steps_done_by(ends: Sequence[float], now_s: float) -> int:
    """Steps of a block that have to run once time `now_s` is reached: the one in flight too."""
    return min(len(ends), bisect.bisect_left(ends, now_s) + 1)
