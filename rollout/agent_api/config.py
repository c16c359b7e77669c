"""`AgentApiConfig`: where the capture endpoint listens and how long it waits for an agent."""

from __future__ import annotations

from pydantic import Field

from foundation.config import FrozenConfig

__all__ = ["AgentApiConfig"]


class AgentApiConfig(FrozenConfig):
    """The bring-your-own agent of `conductor run` / `conductor serve-agent-api`."""

    agent: str = Field(
        default="",
        description="The agent, as `package.module:function` or `path/to/file.py:function`: an "
        "async function of an AgentContext that plays one sample through the OpenAI chat API "
        "(examples/openai_agent.py). Empty: the native agent loop plays the env.",
    )
    host: str = Field(default="127.0.0.1", description="Address the endpoint listens on.")
    port: int = Field(default=0, ge=0, le=65535, description="Its port; 0: a free one.")
    model: str = Field(default="conductor", description="Model name the endpoint reports.")
    max_body_mb: float = Field(
        default=8.0,
        gt=0,
        description="Largest chat call body accepted (a larger one gets 413 before it is "
        "read): parsing and tokenizing an agent's call happen on the run's event loop (MB).",
    )
    call_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="Longest wait for an agent's next chat call (or its end) before its "
        "attempt is an infrastructure error (s).",
    )
