"""The rollout's session hints as they reach SGLang: actions of a request's `kv_hints` envelope.

SGLang 0.5.23 carries `GenerateReqInput.kv_hints` (a versioned `KvHintsEnvelope`) to the
scheduler's `Req.kv_hints` untouched; consumers read the action types they implement and skip
the rest. Ours are the rollout's `KVHintKind` values (`open`, `set_priority`, `tool_wait`,
`tool_done`, `close`) with `{session_id, priority, expected_s}` payloads
(`rollout.engines.sglang.wire.kv_hints_envelope` writes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvcache.hints import HintKind

__all__ = ["SessionHint", "session_hints"]


@dataclass(frozen=True, slots=True)
class SessionHint:
    kind: HintKind
    session_id: str
    priority: int = 0


def session_hints(envelope: Any) -> list[SessionHint]:
    """Our hints in `envelope` (a dict or SGLang's msgspec struct); malformed actions skipped:
    a bad hint must never fail the request that carries it."""
    if envelope is None:
        return []
    actions = _get(envelope, "actions") or []
    hints = []
    kinds = {kind.value for kind in HintKind}
    for action in actions:
        kind = _get(action, "action_type")
        payload = _get(action, "payload") or {}
        if kind not in kinds or not isinstance(payload, Mapping):
            continue
        session_id = payload.get("session_id")
        priority = payload.get("priority", 0)
        if isinstance(session_id, str) and isinstance(priority, int):
            hints.append(SessionHint(HintKind(kind), session_id, priority))
    return hints


def _get(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)
