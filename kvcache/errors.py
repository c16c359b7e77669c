"""The `kvcache` exception tree.

    KVCacheError
    ├── UnknownKVPolicyError       no policy is registered under a name (lists the registered ones)
    ├── KVPolicyRegistrationError  an empty or duplicate policy name was registered
    ├── SessionError               a hint or request names a session that is not open (or is open)
    ├── ReceiptError               a lock receipt was released twice or came from another cache
    ├── CapacityError              KV was cached without reserved or free device space
    └── InvariantError             a cache invariant is broken (raised by `check_cache`)

Running out of device space is not an exception: `reserve` returns an `AllocationResult` whose
`shortfall_tokens` tells the caller how much to preempt. These exceptions are caller bugs or
broken invariants, and every message says what to do.
"""

from __future__ import annotations

from foundation.errors import ConductorError

__all__ = [
    "CapacityError",
    "InvariantError",
    "KVCacheError",
    "KVPolicyRegistrationError",
    "ReceiptError",
    "SessionError",
    "UnknownKVPolicyError",
]


class KVCacheError(ConductorError):
    """Base class of every error raised by `kvcache`."""


class UnknownKVPolicyError(KVCacheError, LookupError):
    """No KV policy is registered under the requested name."""


class KVPolicyRegistrationError(KVCacheError, ValueError):
    """A policy factory was registered under an empty or already-used name."""


class SessionError(KVCacheError, KeyError):
    """A session id is unknown (not opened, or already closed) or opened twice."""

    def __str__(self) -> str:  # KeyError would quote the message; show it plainly
        return str(self.args[0]) if self.args else ""


class ReceiptError(KVCacheError, ValueError):
    """A lock receipt is unknown to this cache (released twice, or issued by another cache)."""


class CapacityError(KVCacheError, ValueError):
    """More device KV was cached or released than the caller had reserved."""


class InvariantError(KVCacheError, AssertionError):
    """A structural or accounting invariant of the cache does not hold."""
