"""Value types that cross the policy boundary: priorities, match/lock/allocation results, decisions.

All are frozen, slotted dataclasses: the policy returns them, the engine acts on them. Token
counts are tokens of KV (not pages); `transfer_s` comes from the shared `TransferModel`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

__all__ = [
    "AllocationResult",
    "InsertResult",
    "KVDecision",
    "LoadBackResult",
    "LockReceipt",
    "OffloadDecision",
    "OffloadReason",
    "PrefetchDecision",
    "PrefixMatch",
    "Priority",
]


class Priority(IntEnum):
    """Priority of a session or requester. A HIGH session belongs to a critical group."""

    LOW = 0
    HIGH = 1

    @classmethod
    def from_engine(cls, engine_priority: int, high_priority_min: int) -> Priority:
        """Map an engine's integer priority (larger is more urgent) onto LOW/HIGH."""
        return cls.HIGH if engine_priority >= high_priority_min else cls.LOW


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """How much of a token sequence is cached, by tier.

    `device_tokens + host_tokens + miss_tokens == query_tokens`. The device part is always a
    prefix; the host part follows it. `recomputed_tokens` is the part of the miss that the session
    had cached before (KV that was lost and must be prefilled again). `device_ready_at_s` is when
    the last in-flight transfer into the matched device part lands (0.0 if none).
    """

    query_tokens: int
    device_tokens: int
    host_tokens: int
    miss_tokens: int
    recomputed_tokens: int = 0
    device_ready_at_s: float = 0.0


@dataclass(frozen=True, slots=True)
class LockReceipt:
    """Proof of a lock on a device-resident prefix; hand it back to `unlock` exactly once.

    A lost receipt under-releases (the prefix stays protected): the safe failure.
    """

    receipt_id: int
    locked_tokens: int


@dataclass(frozen=True, slots=True)
class AllocationResult:
    """Outcome of `reserve(n_tokens, ...)`.

    On success `ok` is True and the tokens are reserved for the caller. On failure nothing was
    evicted and nothing reserved; `shortfall_tokens` is exactly how many more tokens the caller
    must free (e.g. by preempting a running low-priority request) before retrying.
    """

    ok: bool
    requested_tokens: int
    freed_tokens: int = 0
    shortfall_tokens: int = 0
    offloaded_tokens: int = 0
    dropped_tokens: int = 0
    demoted_tokens: int = 0
    transfer_s: float = 0.0


@dataclass(frozen=True, slots=True)
class InsertResult:
    """Outcome of `insert`: how much became newly device-resident and how much is now cached."""

    cached_tokens: int
    new_device_tokens: int
    returned_reserved_tokens: int
    receipt: LockReceipt | None = None  # the moved lock, when `insert` was given one to move


@dataclass(frozen=True, slots=True)
class LockedPrefix:
    """Outcome of `lock_prefix`: the lookup and the lock on its device part, from one walk."""

    match: PrefixMatch
    receipt: LockReceipt


@dataclass(frozen=True, slots=True)
class LoadBackResult:
    """Outcome of `load_back`: host→device copies of a host hit.

    On failure nothing moved; `shortfall_tokens` is what the requester may not evict.
    """

    ok: bool
    loaded_tokens: int
    shortfall_tokens: int = 0
    transfer_s: float = 0.0
    ready_at_s: float = 0.0
    eviction: AllocationResult | None = None
    receipt: LockReceipt | None = None  # the moved lock, when `load_back` was given one to move


class OffloadReason(StrEnum):
    """Why a session's KV was moved to host proactively."""

    TOOL_WAIT = "tool_wait"  # a low-priority session started a long tool call
    PRESSURE = "pressure"  # predicted demand exceeds what the device can give without it
    PRIORITY_CHANGE = "priority_change"  # a tool-waiting session became low priority


@dataclass(frozen=True, slots=True)
class OffloadDecision:
    """The policy moved a session's exclusive KV device→host (`offloaded_tokens` cross the link).

    `demoted_tokens` already had a host copy and were only freed on device.
    """

    session_id: str
    offloaded_tokens: int
    demoted_tokens: int
    transfer_s: float
    reason: OffloadReason


@dataclass(frozen=True, slots=True)
class PrefetchDecision:
    """The policy started copying a session's host KV back to device; it lands at `ready_at_s`."""

    session_id: str
    tokens: int
    transfer_s: float
    ready_at_s: float


KVDecision = OffloadDecision | PrefetchDecision
