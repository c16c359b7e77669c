"""`PoolSessions`: each sample attempt's `EnvSession` as a text env leased from the `EnvPool`.

Real sandboxes (for example the SWE env); the simulator's factory is
`rollout.simulation.sessions.SimWorkloadSessions`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from harness.errors import DockerGoneError, SandboxError
from harness.fleet import Lease, LeasePool
from harness.pool import EnvFactory
from rollout.runtime.env_session import EnvSession, EnvSessionError, SampleRef, TextEnvSession
from rollout.trajectories.chat_format import ChatFormat
from rollout.trajectories.tokenizer import ChatTemplate, Tokenizer

__all__ = ["PoolSessions", "PooledEnv"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PooledEnv:
    """How to lease a prompt's env: the env factory, its image and its reset options."""

    factory: EnvFactory
    image: str
    reset_options: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


class PoolSessions:
    """Text envs leased from `pool` and rendered as chat (`TextEnvSession`).

    Args:
        pool: the env pool or a fleet of them (entered by the caller).
        env_for: the env of a prompt index (e.g. which task, in which image).
        tokenizer: renders observations, decodes actions.
        system_prompt: system message before each env's first observation.
        priorities: (high, low) act-slot priorities.
        tool_of: names the tool a model text calls, for the tool_wait KV hint.
        on_open: called with (session_id, sample) when a session opens (e.g. to tell a
            scripted model which task the session works on).
        chat_format: makes each session's `ChatFormat` (default: ChatML with `template`).
    """

    def __init__(
        self,
        pool: LeasePool,
        env_for: Callable[[int], PooledEnv],
        tokenizer: Tokenizer,
        *,
        system_prompt: str = "",
        template: ChatTemplate | None = None,
        priorities: tuple[int, int] = (1, 0),
        tool_of: Callable[[str], str | None] | None = None,
        tool_result_chars: int = 2000,
        on_open: Callable[[str, SampleRef], None] | None = None,
        chat_format: Callable[[], ChatFormat] | None = None,
    ) -> None:
        self._pool = pool
        self._env_for = env_for
        self._tokenizer = tokenizer
        self._system_prompt = system_prompt
        self._template = template
        self._priorities = priorities
        self._tool_of = tool_of
        self._tool_result_chars = tool_result_chars
        self._on_open = on_open
        self._chat_format = chat_format

    async def open(self, sample: SampleRef) -> EnvSession:
        env = self._env_for(sample.group.prompt_index)
        session_id = f"{sample.sample_id}/r{sample.retry}"
        try:
            lease = await self._pool.acquire(
                env.factory,
                env.image,
                sample_id=sample.sample_id,
                group_id=sample.group.group_id,
                priority=self._priorities[1],
            )
        except DockerGoneError:
            raise  # no sample can start: the run ends, it does not retry them one by one
        except SandboxError as exc:
            raise EnvSessionError(f"no env for {sample.sample_id}: {exc}") from exc
        if self._on_open is not None:
            self._on_open(session_id, sample)
        return self.session(lease, env, session_id, sample)

    def session(
        self, lease: Lease, env: PooledEnv, session_id: str, sample: SampleRef
    ) -> EnvSession:
        """The session that plays `sample` on its leased env (here: the native text session;
        `rollout.agent_api.CaptureSessions` puts a bring-your-own agent there)."""
        return TextEnvSession(
            lease,
            self._tokenizer,
            session_id=session_id,
            system_prompt=self._system_prompt,
            reset_options=env.reset_options,
            template=self._template,
            priorities=self._priorities,
            tool_of=self._tool_of,
            tool_result_chars=self._tool_result_chars,
            chat_format=self._chat_format,
        )

    def prewarm(self, prompt_indices: Sequence[int]) -> None:
        self._pool.prewarm(sorted({self._env_for(index).image for index in prompt_indices}))
