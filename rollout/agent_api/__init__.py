"""Bring your own agent: OpenAI-style chat messages in, exact token-level trajectories out.

`conversation` is the pure part: it validates the messages an agent sends, tells whether
they continue what the trajectory already holds (or fork it), and turns the model's text into
an OpenAI assistant message with tool calls. (The capture endpoint that serves it over HTTP is
issue 16's second half, still open.)
"""

from rollout.agent_api.conversation import (
    Continuation,
    Fork,
    Message,
    MessageError,
    ToolCall,
    assistant_message,
    continue_history,
    parse_messages,
    tools_system_text,
)

__all__ = [
    "Continuation",
    "Fork",
    "Message",
    "MessageError",
    "ToolCall",
    "assistant_message",
    "continue_history",
    "parse_messages",
    "tools_system_text",
]
