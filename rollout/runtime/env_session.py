"""`EnvSession`: one sample's environment as the agent loop drives it, in token ids.

The agent loop never sees text: `start()` gives the prompt ids, `act(generated_ids)` runs the
model's turn in the env and gives back the ids to append before the next turn.

`TextEnvSession` wraps a text `AgentEnv` leased from the `EnvPool`. The env's observations
become chat messages through an append-only `ChatPromptBuilder`; the model's ids are decoded to
text for the env, but the trajectory keeps the engine's exact ids (the builder appends them
verbatim and only its template and observation tokens are returned). The simulator's
token-level sessions are `rollout.simulation.sessions.SimEnvSession`.

Sessions emit the env-side step events (env_init, pre_act, act, reward) — or leave them to the
env pool, which emits them for leased envs; the agent loop emits the engine-side ones.
Infrastructure failures are values (`ActOutcome.infra_error`) or `EnvSessionError` from
`start()`; a malformed action is an ordinary observation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from harness.errors import SandboxError
from harness.fleet import Lease
from rollout.core.classes import PriorityClass
from rollout.core.sources import SourceLayout
from rollout.core.types import Group
from rollout.errors import RolloutError
from rollout.trajectories.chat_format import ChatFormat
from rollout.trajectories.tokenizer import ChatPromptBuilder, ChatTemplate, Tokenizer

__all__ = [
    "ActOutcome",
    "EnvSession",
    "EnvSessionError",
    "SampleRef",
    "SessionFactory",
    "SourcedSessions",
    "TextEnvSession",
    "model_text",
    "started_builder",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class EnvSessionError(RolloutError):
    """The env could not start (no sandbox, no image); the sample is retried."""


@dataclass(frozen=True, slots=True)
class SampleRef:
    """Which sample a session serves: its group, index, how many times it was retried, and the
    priority class of its group's task source."""

    sample_id: str
    group: Group
    index: int
    retry: int = 0
    priority_class: PriorityClass = PriorityClass.NORMAL


@dataclass(frozen=True, slots=True)
class ActOutcome:
    """What one action did. `observation_ids` are appended before the next turn (empty at the end).

    `done` ends the episode (`terminated` by the env, or `truncated` by a limit, named by
    `truncation_reason`); `infra_error` voids it (the sample is retried). `pre_act_s` is the
    wait for an act slot or a container, `act_s` the tool's own run time. `trajectory_info` is
    kept in the finished trajectory's `info` (e.g. a recorded fork).
    """

    observation_ids: tuple[int, ...] = ()
    done: bool = False
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    infra_error: str | None = None
    tool_name: str | None = None
    tool_result: str | None = None
    pre_act_s: float = 0.0
    act_s: float = 0.0
    info: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    truncation_reason: str | None = None
    trajectory_info: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@runtime_checkable
class EnvSession(Protocol):
    """One sample's env, in token ids. Call `start`, then `act` until done, then `close`."""

    @property
    def session_id(self) -> str:
        """The engine session (KV ownership and the token model's key)."""
        ...

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """Ids that end a model turn; valid after `start`."""
        ...

    async def start(self) -> tuple[int, ...]:
        """Reset the env; returns the prompt ids. Raises `EnvSessionError` on infra failure."""
        ...

    def peek_tool(self, generated_ids: Sequence[int]) -> str | None:
        """The tool the turn calls, if it can be told before acting (for the KV hint)."""
        ...

    async def act(self, generated_ids: Sequence[int], *, high: bool) -> ActOutcome:
        """Run the model's turn in the env; `high`: the act slot's priority class."""
        ...

    def set_priority(self, high: bool) -> None:
        """The sample's group became critical (or stopped being critical)."""
        ...

    async def close(self) -> None:
        """Release the env (idempotent)."""
        ...


class SessionFactory(Protocol):
    """Opens the session of each sample attempt."""

    async def open(self, sample: SampleRef) -> EnvSession:
        """A fresh session for `sample` (raises `EnvSessionError` if none can be had)."""
        ...

    def prewarm(self, prompt_indices: Sequence[int]) -> None:
        """Prompts the next groups will take (start their containers ahead of demand)."""
        ...


class SourcedSessions:
    """One `SessionFactory` per task source, behind the `SessionFactory` seam (a mixed run).

    A sample goes to its group's source's factory with its prompt index made local to that
    source (`SourceLayout.locate`), so each factory sees the indices of its own dataset;
    `prewarm` splits the global indices the same way.
    """

    def __init__(self, layout: SourceLayout, factories: Mapping[str, SessionFactory]) -> None:
        missing = set(layout.names) - set(factories)
        if missing:
            raise RolloutError(f"no session factory for task sources {sorted(missing)}")
        self._layout = layout
        self._factories = dict(factories)

    @property
    def factories(self) -> Mapping[str, SessionFactory]:
        return MappingProxyType(self._factories)

    async def open(self, sample: SampleRef) -> EnvSession:
        group = sample.group
        name, local = self._layout.locate(group.prompt_index)
        if group.source and group.source != name:
            raise RolloutError(
                f"group {group.group_id} of source {group.source!r} has prompt index "
                f"{group.prompt_index}, which belongs to {name!r}"
            )
        local_group = replace(group, prompt_index=local)
        return await self._factories[name].open(replace(sample, group=local_group))

    def prewarm(self, prompt_indices: Sequence[int]) -> None:
        by_source: dict[str, list[int]] = {}
        for index in prompt_indices:
            name, local = self._layout.locate(index)
            by_source.setdefault(name, []).append(local)
        for name, indices in by_source.items():
            self._factories[name].prewarm(indices)


class TextEnvSession:
    """A text `AgentEnv` leased from the env pool, rendered as chat (see the module docstring).

    Args:
        lease: the sample's env lease (the pool emits its env_init/pre_act/act/reward events).
        tokenizer: renders observations and decodes the model's ids.
        session_id: the engine session of this attempt.
        system_prompt: a system message before the env's first observation ('' for none).
        reset_options: passed to the env's `reset` (e.g. which task).
        priorities: (high, low) act-slot priorities of the env pool.
        tool_of: names the tool a model text calls (for the KV hint), or None.
        tool_result_chars: characters of each observation kept in `ActOutcome.tool_result`.
        chat_format: makes the session's `ChatFormat` (a model's own chat template); default:
            ChatML with `template`.
    """

    def __init__(
        self,
        lease: Lease,
        tokenizer: Tokenizer,
        *,
        session_id: str,
        system_prompt: str = "",
        reset_options: Mapping[str, Any] | None = None,
        template: ChatTemplate | None = None,
        priorities: tuple[int, int] = (1, 0),
        tool_of: Callable[[str], str | None] | None = None,
        tool_result_chars: int = 2000,
        chat_format: Callable[[], ChatFormat] | None = None,
    ) -> None:
        self._lease = lease
        self._tokenizer = tokenizer
        self._session_id = session_id
        self._system_prompt = system_prompt
        self._reset_options = dict(reset_options or {})
        self._template = template
        self._priorities = priorities
        self._tool_of = tool_of
        self._tool_result_chars = tool_result_chars
        self._chat_format = chat_format
        self._chat: ChatPromptBuilder | None = None

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return self._builder().stop_token_ids()

    @property
    def chat(self) -> ChatPromptBuilder:
        """The session's own copy of the token list (equal to the trajectory's)."""
        return self._builder()

    async def start(self) -> tuple[int, ...]:
        try:
            observation, _ = await self._lease.areset(options=self._reset_options)
        except SandboxError as exc:
            raise EnvSessionError(f"the env could not reset: {exc}") from exc
        messages = [("user", observation)]
        if self._system_prompt:
            messages.insert(0, ("system", self._system_prompt))
        chat_format = self._chat_format() if self._chat_format is not None else None
        self._chat = ChatPromptBuilder(
            self._tokenizer, self._template, messages, chat_format=chat_format
        )
        return self._chat.open_turn()

    def peek_tool(self, generated_ids: Sequence[int]) -> str | None:
        if self._tool_of is None:
            return None
        return self._tool_of(self._decode(generated_ids))

    async def act(self, generated_ids: Sequence[int], *, high: bool) -> ActOutcome:
        chat = self._builder()
        self.set_priority(high)
        # The builder only renders the template: logprobs and versions live in the trajectory.
        chat.append_generated(generated_ids, [0.0] * len(generated_ids), version=0)
        chat.end_turn()
        try:
            observation, reward, terminated, truncated, info = await self._lease.astep(
                self._decode(generated_ids)
            )
        except SandboxError as exc:
            return ActOutcome(done=True, truncated=True, infra_error=f"sandbox_error: {exc}")
        infra_error = self._lease.infra_error or _infra_text(info.get("infra_error"))
        outcome = ActOutcome(
            done=terminated or truncated or infra_error is not None,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            infra_error=infra_error,
            tool_name=info.get("tool"),
            tool_result=observation[: self._tool_result_chars],
            pre_act_s=float(info.get("pre_act_s", 0.0)),
            act_s=float(info.get("act_s", 0.0)),
            info=info,
            truncation_reason=_reason_text(info.get("truncation_reason")) if truncated else None,
        )
        if outcome.done:
            return outcome
        before = len(chat.token_ids)
        chat.add_observation(observation)
        chat.open_turn()
        return replace(outcome, observation_ids=chat.token_ids[before:])

    def set_priority(self, high: bool) -> None:
        self._lease.set_priority(self._priorities[0] if high else self._priorities[1])

    async def close(self) -> None:
        await self._lease.release()

    def _builder(self) -> ChatPromptBuilder:
        return started_builder(self._chat)

    def _decode(self, ids: Sequence[int]) -> str:
        return model_text(self._tokenizer, ids, self._builder().stop_token_ids())


def started_builder(chat: ChatPromptBuilder | None) -> ChatPromptBuilder:
    """A session's builder, once `start()` has made it."""
    if chat is None:
        raise EnvSessionError("the session has not started; call start() first")
    return chat


def model_text(tokenizer: Tokenizer, ids: Sequence[int], stop_ids: Sequence[int]) -> str:
    """The model's turn as text without its stop token (the env or agent must not see it)."""
    stops = set(stop_ids)
    end = len(ids)
    while end and ids[end - 1] in stops:
        end -= 1
    return tokenizer.decode(ids[:end])


def _infra_text(value: object) -> str | None:
    """`info["infra_error"]` as one line: envs give a string or a {"code", "message"} dict."""
    if not value:
        return None
    if isinstance(value, Mapping):
        return f"{value.get('code', 'infra_error')}: {value.get('message', '')}".strip()
    return str(value)


def _reason_text(value: object) -> str | None:
    """An env's truncation reason (a str enum, or None) as plain text."""
    if value is None:
        return None
    return str(getattr(value, "value", value))
