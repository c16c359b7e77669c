"""What a bring-your-own agent gets for one sample: where to send its chat calls, the task,
the tools, and a way to act in the sample's env."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AgentContext", "AgentFn", "StepResult"]


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one action did in the sample's env (a Gymnasium step, as text)."""

    observation: str
    reward: float
    done: bool
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentContext:
    """One sample, as the agent sees it.

    Point an OpenAI client at `base_url` with `api_key` (both belong to this sample: the
    conductor turns every call into a generation of this sample's trajectory). `messages`
    opens the conversation (the system prompt and the task), `tools` are the env's tools in
    OpenAI's format; `step` runs an action in the sample's env (e.g. a JSON tool call
    `{"name": "bash", "arguments": {...}}`), so its step events line up with the sample.
    """

    base_url: str
    api_key: str
    model: str
    sample_id: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...]
    step: Callable[[str], Awaitable[StepResult]]


AgentFn = Callable[[AgentContext], Awaitable[float | None]]
"""An agent: plays one sample and returns its reward, or None to take the env's reward."""
