"""`SimRequest`: the simulated engine's mutable record of one generation, from arrival to result."""

from __future__ import annotations

import asyncio
from enum import IntEnum

from rollout.engines.base import FinishReason, GenerateRequest, GenerateResult
from rollout.engines.sim.kv import JoinedTokens, TokenSeq, in_namespace
from rollout.engines.sim.token_model import TurnPlan

__all__ = ["SimRequest", "Stage"]


class Stage(IntEnum):
    WAITING = 0  # in the waiting queue (new, retracted or preempted)
    PREFILL = 1  # admitted: holds its cached prefix, loading or prefilling in chunks
    DECODE = 2  # in the decode batch
    DONE = 3  # returned


class SimRequest:
    """One generation in flight. Counts are tokens; `fill_ids` is what must be in KV to decode.

    `fill_ids` is the prompt, or prompt + output so far after a retraction (re-prefilled like
    SGLang does). `ahead` counts decode KV slots reserved for the decode block in flight.
    """

    __slots__ = (
        "abort_requested",
        "ahead",
        "cached_tokens",
        "epoch",
        "fill_ids",
        "future",
        "generated",
        "input_tokens",
        "kv_input",
        "max_new",
        "plan",
        "prefilled",
        "priority",
        "queued_s",
        "ready_at_s",
        "request",
        "retractions",
        "seq",
        "stage",
        "stop_reason",
        "target",
        "version_changes",
        "waiting_since_s",
    )

    def __init__(
        self,
        request: GenerateRequest,
        plan: TurnPlan,
        seq: int,
        future: asyncio.Future[GenerateResult],
        max_new_tokens: int,
    ) -> None:
        self.request = request
        # The request's priority, then its session's: a `set_priority` hint moves it (the KV it
        # may evict and what protects it follow the session, as the KV manager sees it)
        self.priority = request.priority
        self.plan = plan
        self.seq = seq
        self.future = future
        self.input_tokens = len(request.input_ids)
        self.max_new = max_new_tokens
        planned = len(plan.output_ids)
        self.target = min(planned, max_new_tokens)
        self.stop_reason = (
            FinishReason.STOP
            if plan.ends_with_stop and planned <= max_new_tokens
            else FinishReason.LENGTH
        )
        self.stage = Stage.WAITING
        # The prompt as the KV backend sees it (shifted into the request's cache namespace)
        self.kv_input: TokenSeq = in_namespace(request.input_ids, request.cache_namespace)
        self.fill_ids: TokenSeq = self.kv_input
        self.prefilled = 0
        self.generated = 0
        self.ahead = 0
        self.ready_at_s = 0.0
        self.cached_tokens = -1  # prefix hit at first admission; -1 until admitted
        self.retractions = 0
        self.abort_requested = False
        self.epoch = 0  # bumped on every push into the waiting queue (lazy deletion)
        self.queued_s = 0.0  # time spent waiting for a forward, over every wait so far
        self.waiting_since_s: float | None = None  # start of the current wait (None: computing)
        # (old version, output tokens so far) at each weight update this request lived through
        self.version_changes: list[tuple[int, int]] | None = None

    @property
    def rid(self) -> str:
        return self.request.rid

    @property
    def fill_target(self) -> int:
        return len(self.fill_ids)

    @property
    def context_tokens(self) -> int:
        """KV a decode step of this request reads: prompt plus output so far."""
        return self.input_tokens + self.generated

    @property
    def remaining_new_tokens(self) -> int:
        """What SGLang's admission estimate uses: max_new_tokens minus output so far."""
        return self.max_new - self.generated

    def kv_ids(self) -> TokenSeq:
        """Prompt + output so far: the sequence whose KV this request has written."""
        if self.generated == 0:
            return self.kv_input
        output = self.plan.output_ids[: self.generated]
        if self.kv_input is self.request.input_ids:
            return JoinedTokens(self.request.input_ids, output)
        return in_namespace(
            JoinedTokens(self.request.input_ids, output), self.request.cache_namespace
        )

    def start_waiting(self, now_s: float) -> None:
        """A wait for the next forward starts (arrival, retraction, preemption)."""
        if self.waiting_since_s is None:
            self.waiting_since_s = now_s

    def stop_waiting(self, now_s: float) -> None:
        """The wait ends: a forward computes this request (or it leaves)."""
        if self.waiting_since_s is not None:
            self.queued_s += max(0.0, now_s - self.waiting_since_s)
            self.waiting_since_s = None

    def requeue(self) -> None:
        """Back to waiting after a retraction or preemption: re-prefill prompt + output so far."""
        self.stage = Stage.WAITING
        self.fill_ids = self.kv_ids()
        self.prefilled = 0
        self.ahead = 0
        self.ready_at_s = 0.0
        self.retractions += 1

    def note_version_change(self, old_version: int) -> None:
        """A weight update happened while this request was live (an in-place or retract pause)."""
        if self.version_changes is None:
            self.version_changes = []
        self.version_changes.append((old_version, self.generated))

    def output_versions(self, weight_version: int) -> tuple[int, ...]:
        """The policy version of each output token, or () when `weight_version` made them all."""
        changes = self.version_changes
        if not changes or all(tokens == 0 for _, tokens in changes):
            return ()
        versions: list[int] = []
        for old_version, tokens in changes:
            versions.extend([old_version] * (min(tokens, self.generated) - len(versions)))
        versions.extend([weight_version] * (self.generated - len(versions)))
        return tuple(versions)

    def result(self, reason: FinishReason, weight_version: int) -> GenerateResult:
        return GenerateResult(
            rid=self.rid,
            output_ids=self.plan.output_ids[: self.generated],
            output_logprobs=self.plan.output_logprobs[: self.generated],
            finish_reason=reason,
            prompt_tokens=self.input_tokens,
            cached_tokens=max(0, self.cached_tokens),
            weight_version=weight_version,
            num_retractions=self.retractions,
            queued_s=self.queued_s,
            output_versions=self.output_versions(weight_version),
        )
