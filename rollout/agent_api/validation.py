"""What the agent API accepts before a call reaches a sample: pure checks, no I/O.

A call is checked whole before it touches its sample's session (issue 28: bad bodies gave
HTTP 500 and a traceback, and a call with another sample's client ended that sample's
trajectory). Each check returns the message of the 4xx answer, or None when the call passes.
"""

from __future__ import annotations

import hmac
from typing import Any

from rollout.agent_api.conversation import MessageError, parse_messages

__all__ = ["bearer_key", "chat_body_error", "key_matches"]


def bearer_key(authorization: str | None) -> str | None:
    """The key of an `Authorization: Bearer <key>` header (what OpenAI's SDKs send), or None."""
    if not authorization:
        return None
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return key.strip()


def key_matches(presented: str, expected: str) -> bool:
    """Whether `presented` is `expected`, compared in constant time (no timing side channel
    tells an agent how much of another sample's key it has guessed)."""
    return hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))


def chat_body_error(body: Any) -> str | None:
    """Why `body` is not a chat completion call this endpoint serves, or None if it is."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    stream = body.get("stream")
    if stream not in (None, False, True):
        return f"`stream` must be a boolean, got {_shown(stream)}"
    if stream:
        return "streaming is not supported; call with stream=false"
    n = body.get("n")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool)):
        return f"`n` must be an integer, got {_shown(n)}"
    if n not in (None, 1):
        return "n must be 1: each sample is one trajectory"
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        return f"`tools` must be a list of OpenAI function tools, got {_shown(tools)}"
    try:
        parse_messages(body.get("messages"))
    except MessageError as exc:
        return str(exc)
    return None


def _shown(value: Any) -> str:
    """A value as an error message names it (short, whatever the agent sent)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."
