"""Bring your own agent: OpenAI-style chat messages in, exact token-level trajectories out.

`conversation` is the pure part: it validates the messages an agent sends, tells whether
they continue what the trajectory already holds (or fork it), and turns the model's text into
an OpenAI assistant message with tool calls. `AgentApiServer` is the OpenAI-compatible
endpoint (one base URL per sample attempt), `CaptureSession` the `EnvSession` an agent plays
through it, `CaptureSessions` their factory on the env pool (docs/trainers.md).
"""

from rollout.agent_api.capture import CaptureSession
from rollout.agent_api.context import AgentContext, AgentFn, StepResult
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
from rollout.agent_api.server import AgentApiServer
from rollout.agent_api.sessions import CaptureSessions

__all__ = [
    "AgentApiServer",
    "AgentContext",
    "AgentFn",
    "CaptureSession",
    "CaptureSessions",
    "Continuation",
    "Fork",
    "Message",
    "MessageError",
    "StepResult",
    "ToolCall",
    "assistant_message",
    "continue_history",
    "parse_messages",
    "tools_system_text",
]
