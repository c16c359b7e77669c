"""Session factories: where each sample attempt's `EnvSession` comes from.

* `SimWorkloadSessions` opens simulated envs of a `SyntheticWorkload` (virtual-time studies).
* `PoolSessions` leases text envs from the `EnvPool` (real sandboxes; e.g. the SWE env).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from harness.clock import Clock
from harness.errors import SandboxError
from harness.events import EventBus
from harness.pool import EnvFactory, EnvPool
from rollout.env_session import EnvSessionError, SampleRef, SimEnvSession, TextEnvSession
from rollout.predictors.base import RemainingWork, SampleContext
from rollout.tokenizer import ChatTemplate, Tokenizer
from rollout.workload import SampleScript, ScriptedTokenModel, SyntheticWorkload

__all__ = ["PoolSessions", "PooledEnv", "SimWorkloadSessions"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class SimWorkloadSessions:
    """Simulated envs of `workload`; `token_model` must be the one the engine plays.

    Each admitted group gets the next workload group index in first-seen order, so a group
    re-admitted after a restart (same group id) replays the same scripts, and two groups of
    the same prompt never share sessions.
    """

    def __init__(
        self,
        workload: SyntheticWorkload,
        token_model: ScriptedTokenModel,
        *,
        bus: EventBus,
        clock: Clock,
    ) -> None:
        self._workload = workload
        self._token_model = token_model
        self._bus = bus
        self._clock = clock
        self._group_index: dict[str, int] = {}
        self._scripts: dict[str, SampleScript] = {}

    async def open(self, sample: SampleRef) -> SimEnvSession:
        group_index = self._group_index.setdefault(sample.group.group_id, len(self._group_index))
        env = self._workload.make_env(group_index, sample.index)
        self._token_model.forget(env.session_id)  # a retry replays the script from turn 0
        self._scripts[sample.sample_id] = env.script
        return SimEnvSession(
            env,
            sample,
            stop_token_ids=(self._workload.config.eos_token_id,),
            bus=self._bus,
            clock=self._clock,
        )

    def prewarm(self, prompt_indices: Sequence[int]) -> None:
        """Simulated envs need no warm-up (their reset time is in the script)."""

    def truth(self, context: SampleContext) -> RemainingWork:
        """The true remaining work of a live sample (for the oracle predictor)."""
        script = self._scripts.get(context.sample_id)
        if script is None:
            raise KeyError(f"sample {context.sample_id} has no open session")
        rest = script.turns[context.turns_done :]
        return RemainingWork(
            turns=float(len(rest)), gen_tokens=float(sum(turn.output_tokens for turn in rest))
        )


@dataclass(frozen=True, slots=True)
class PooledEnv:
    """How to lease a prompt's env: the env factory, its image and its reset options."""

    factory: EnvFactory
    image: str
    reset_options: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


class PoolSessions:
    """Text envs leased from `pool` and rendered as chat (`TextEnvSession`).

    Args:
        pool: the env pool (entered by the caller).
        env_for: the env of a prompt index (e.g. which task, in which image).
        tokenizer: renders observations, decodes actions.
        system_prompt: system message before each env's first observation.
        priorities: (high, low) act-slot priorities.
        tool_of: names the tool a model text calls, for the tool_wait KV hint.
        on_open: called with (session_id, sample) when a session opens (e.g. to tell a
            scripted model which task the session works on).
    """

    def __init__(
        self,
        pool: EnvPool,
        env_for: Callable[[int], PooledEnv],
        tokenizer: Tokenizer,
        *,
        system_prompt: str = "",
        template: ChatTemplate | None = None,
        priorities: tuple[int, int] = (1, 0),
        tool_of: Callable[[str], str | None] | None = None,
        tool_result_chars: int = 2000,
        on_open: Callable[[str, SampleRef], None] | None = None,
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

    async def open(self, sample: SampleRef) -> TextEnvSession:
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
        except SandboxError as exc:
            raise EnvSessionError(f"no env for {sample.sample_id}: {exc}") from exc
        if self._on_open is not None:
            self._on_open(session_id, sample)
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
        )

    def prewarm(self, prompt_indices: Sequence[int]) -> None:
        self._pool.prewarm(sorted({self._env_for(index).image for index in prompt_indices}))
