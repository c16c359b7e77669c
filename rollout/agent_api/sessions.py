"""`CaptureSessions`: each sample attempt played by a bring-your-own agent on a pooled env."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.fleet import Lease
from rollout.agent_api.capture import CaptureSession
from rollout.agent_api.context import AgentFn
from rollout.agent_api.server import AgentApiServer
from rollout.runtime.env_session import EnvSession, SampleRef
from rollout.runtime.pool_sessions import PooledEnv, PoolSessions

__all__ = ["CaptureSessions"]


class CaptureSessions(PoolSessions):
    """`PoolSessions` whose sessions are `CaptureSession`s: the env is leased from the pool as
    for native agents (same events, same act slots), and `agent` plays it over `server`.

    Takes `PoolSessions`' arguments, plus the agent, the server, the env's tools in OpenAI's
    format (offered to the agent) and the longest wait for the agent's next call.
    """

    def __init__(
        self,
        *args: Any,
        agent: AgentFn,
        server: AgentApiServer,
        tools: Sequence[Mapping[str, Any]] = (),
        call_timeout_s: float = 600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._agent = agent
        self._server = server
        self._tools = tuple(tools)
        self._call_timeout_s = call_timeout_s

    def session(
        self, lease: Lease, env: PooledEnv, session_id: str, sample: SampleRef
    ) -> EnvSession:
        return CaptureSession(
            agent=self._agent,
            server=self._server,
            lease=lease,
            tokenizer=self._tokenizer,
            session_id=session_id,
            sample_id=sample.sample_id,
            system_prompt=self._system_prompt,
            tools=self._tools,
            reset_options=env.reset_options,
            template=self._template,
            chat_format=self._chat_format() if self._chat_format is not None else None,
            priorities=self._priorities,
            call_timeout_s=self._call_timeout_s,
            tool_result_chars=self._tool_result_chars,
        )
