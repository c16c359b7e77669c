"""The `Engine` protocol: the one seam between the rollout layer and an inference engine.

Shaped after SGLang's `/generate` (token ids in; token ids, logprobs and a finish reason out;
`rid`, `session_id`, `priority`, `kv_hints`) so that the simulated engine (`rollout.engines.sim`)
and the SGLang HTTP client fit it alike. See `shared/reference/sglang.md` §1 and §7.

Abort semantics follow SGLang: `abort(rid)` makes the pending `generate` call *return normally*
with the tokens produced so far and `FinishReason.ABORT`; prompt + partial output stay in the
prefix cache, so resubmitting `input_ids + output_ids` resumes cheaply.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, overload, runtime_checkable

from foundation.errors import ConductorError

__all__ = [
    "Engine",
    "EngineError",
    "EngineGoneError",
    "EngineStats",
    "FinishReason",
    "GenerateRequest",
    "GenerateResult",
    "KVHint",
    "KVHintKind",
    "SamplingParams",
    "TokenIds",
    "kv_headroom",
]


class EngineError(ConductorError):
    """The engine failed (unreachable, crashed, protocol violation). The caller retries the turn."""


class EngineGoneError(EngineError):
    """No endpoint of the engine has answered for longer than its outage limit.

    Unlike its parent this is not one turn's bad luck: no sample can generate, so the agent
    loop does not turn it into an infra error and retry; it ends the run (one line, with the
    resume command: the last checkpoint is kept).
    """


class FinishReason(StrEnum):
    """Why a generation ended (SGLang's `meta_info.finish_reason.type`)."""

    STOP = "stop"  # a stop token or string was produced
    LENGTH = "length"  # max_new_tokens reached
    ABORT = "abort"  # aborted by `abort(rid)` or a pause; output is partial


class KVHintKind(StrEnum):
    """What the agent loop tells the engine's KV manager about a session (kvcache/hints.py)."""

    OPEN = "open"  # a session starts, with a priority
    SET_PRIORITY = "set_priority"  # its group became critical or stopped being critical
    TOOL_WAIT = "tool_wait"  # its turn ended and a tool runs for about `expected_s`
    TOOL_DONE = "tool_done"  # the tool returned; the next turn comes soon
    CLOSE = "close"  # the sample finished; its KV is no longer needed by it


@dataclass(frozen=True, slots=True)
class KVHint:
    kind: KVHintKind
    session_id: str
    priority: int = 0
    expected_s: float | None = None


@dataclass(frozen=True, slots=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop_token_ids: tuple[int, ...] = ()


class TokenIds(Protocol):
    """A request's token ids: a tuple, or an immutable view whose slices are tuples."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[int]: ...

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """One generation call. `priority`: larger is more urgent (SGLang's default direction).

    `input_ids` is a tuple or an immutable view of one (the agent loop sends a
    `kvcache.page_keys.TokenSnapshot` of its record: no per-turn copy of a long context).
    Engines read it with `len`, indexing and slicing (slices are tuples).

    `cache_namespace` partitions the prefix cache (SGLang's `extra_key`): a request reuses
    only KV cached by requests of the same namespace. '' is the shared namespace (no key);
    the conductor sets 'v<policy version>' under `version_isolation: namespace`.

    `deadline_s`: when the request can no longer help the training step that waits for it,
    on the event loop's clock (`loop.time()`, which the conductor's clock reads); the engine
    aborts it then (partial output, `ABORT`, as for `abort(rid)`). None: no deadline.
    """

    rid: str
    input_ids: TokenIds
    sampling: SamplingParams
    session_id: str = ""
    priority: int = 0
    kv_hints: tuple[KVHint, ...] = ()
    cache_namespace: str = ""
    deadline_s: float | None = None


@dataclass(frozen=True, slots=True)
class GenerateResult:
    """The engine's answer. `output_logprobs[i]` is the behaviour logprob of `output_ids[i]`."""

    rid: str
    output_ids: tuple[int, ...]
    output_logprobs: tuple[float, ...]
    finish_reason: FinishReason
    prompt_tokens: int
    cached_tokens: int = 0
    weight_version: int = 0
    num_retractions: int = 0
    # Seconds the request waited in the engine's queue, not computing (SGLang's
    # `meta_info.queue_time` where the server reports it; 0.0 when the engine does not say).
    queued_s: float = 0.0
    # The policy version of each output token when a weight update fell inside the request
    # (SGLang's `meta_info.weight_versions` spans after an in-place or retract pause); empty:
    # every token has `weight_version`.
    output_versions: tuple[int, ...] = ()

    def token_versions(self) -> int | tuple[int, ...]:
        """`weight_version` when one version produced every token, else one per token."""
        return self.output_versions or self.weight_version

    def __post_init__(self) -> None:
        if self.queued_s < 0:
            raise EngineError(f"request {self.rid}: queued_s must be >= 0, got {self.queued_s}")
        if self.output_versions and len(self.output_versions) != len(self.output_ids):
            raise EngineError(
                f"request {self.rid}: {len(self.output_ids)} output ids but "
                f"{len(self.output_versions)} per-token versions"
            )
        if len(self.output_ids) != len(self.output_logprobs):
            raise EngineError(
                f"request {self.rid}: {len(self.output_ids)} output ids but "
                f"{len(self.output_logprobs)} logprobs; an engine must return one logprob per "
                "output token"
            )


@dataclass(frozen=True, slots=True)
class EngineStats:
    """A snapshot the scheduler reads to decide on admission and preemption."""

    running_requests: int
    waiting_requests: int
    max_running_requests: int
    kv_used_tokens: int
    kv_capacity_tokens: int
    weight_version: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def kv_headroom(self) -> float:
        """Fraction of device KV that is free (0..1)."""
        return kv_headroom(self.kv_used_tokens, self.kv_capacity_tokens)


def kv_headroom(used_tokens: int, capacity_tokens: int) -> float:
    """Fraction of `capacity_tokens` of device KV that is free (0..1; 0 with no capacity)."""
    if capacity_tokens <= 0:
        return 0.0
    return max(0.0, 1.0 - used_tokens / capacity_tokens)


@runtime_checkable
class Engine(Protocol):
    """An inference engine as the rollout layer sees it."""

    name: str

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        """Generate until a stop token, `max_new_tokens`, or an abort (then partial output)."""
        ...

    async def abort(self, rid: str) -> None:
        """Abort `rid` if it is queued or running; unknown rids are ignored."""
        ...

    async def send_kv_hints(self, hints: Sequence[KVHint]) -> None:
        """Deliver out-of-band session hints (tool_wait, tool_done, priority changes, close)."""
        ...

    async def pause(self) -> None:
        """Abort everything in flight (callers get partial outputs) and accept no new work."""
        ...

    async def resume(self) -> None:
        """Accept work again after `pause`."""
        ...

    async def update_weights(self, version: int, *, flush_cache: bool = True) -> None:
        """Install policy `version`; tokens generated afterwards carry it.

        `flush_cache=False` keeps the prefix cache (the caller keeps versions apart with
        request cache namespaces); an engine built with `flush_cache_on_weight_update: false`
        never flushes on an update.
        """
        ...

    def stats(self) -> EngineStats:
        """Current load and KV occupancy."""
        ...

    async def aclose(self) -> None:
        """Release resources; idempotent."""
        ...
