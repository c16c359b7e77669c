"""`CaptureSession`: an `EnvSession` played by a bring-your-own agent over the chat API.

The agent loop keeps the model's side exactly as for native agents (scheduling, priorities,
preemption, KV hints, the append-only token record); this session stands where the env
stands. `start()` launches the agent and waits for its first chat call, whose messages are the
prompt. Each `act(generated_ids)` answers the pending call with the model's turn as an OpenAI
assistant message (tool calls parsed), then waits for the agent's next call (the wait is the
sample's tool time) or its end:

* a call that continues the history adds its new user and tool messages as the observation;
* a call that rewrites it (an edited, dropped or invented message) ends the trajectory as
  truncated with the fork recorded (`info["fork"]`), and the call gets a 409;
* the agent returning ends the episode with its reward (or the env's, when it returns None);
  an agent that raises, stalls past `call_timeout_s` or sends a malformed call voids the
  attempt as an infrastructure error (the conductor retries the sample).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import SandboxError
from harness.fleet import Lease
from rollout.agent_api.context import AgentContext, AgentFn, StepResult
from rollout.agent_api.conversation import (
    Continuation,
    Message,
    MessageError,
    assistant_message,
    continue_history,
    parse_messages,
    tools_system_text,
)
from rollout.agent_api.server import AgentApiServer, ApiReply, api_error
from rollout.runtime.env_session import (
    ActOutcome,
    EnvSessionError,
    model_text,
    started_builder,
)
from rollout.trajectories.chat_format import ChatFormat
from rollout.trajectories.tokenizer import ChatPromptBuilder, ChatTemplate, Tokenizer

__all__ = ["CaptureSession"]


@dataclass(slots=True)
class _Call:
    body: dict[str, Any]
    reply: asyncio.Future[ApiReply]
    arrived_s: float = 0.0  # time.monotonic() when it reached the session


@dataclass(frozen=True, slots=True)
class _AgentEnded:
    reward: float | None = None
    error: BaseException | None = None


class CaptureSession:
    """See the module docstring.

    Args:
        agent: the agent function, run once per attempt.
        server: where its chat calls arrive.
        lease: the sample's env (its `step` runs the agent's actions), or None for an agent
            that brings its own world and returns its reward.
        tokenizer, template, chat_format: render messages as the native sessions do; a
            model's chat template also renders the request's `tools` (`tools=`), plain ChatML
            gets them as the Hermes/Qwen tools block in the system message.
        session_id: the engine session of this attempt.
        system_prompt: the system message offered to the agent (`AgentContext.messages`).
        tools: the env's tools in OpenAI's format, offered to the agent.
        reset_options: passed to the env's `reset`.
        priorities: (high, low) act-slot priorities of the env pool.
        call_timeout_s: longest wait for the agent's next call or its end.
    """

    def __init__(
        self,
        *,
        agent: AgentFn,
        server: AgentApiServer,
        lease: Lease | None,
        tokenizer: Tokenizer,
        session_id: str,
        sample_id: str,
        system_prompt: str = "",
        tools: Sequence[Mapping[str, Any]] = (),
        reset_options: Mapping[str, Any] | None = None,
        template: ChatTemplate | None = None,
        chat_format: ChatFormat | None = None,
        priorities: tuple[int, int] = (1, 0),
        call_timeout_s: float = 600.0,
        tool_result_chars: int = 2000,
    ) -> None:
        self._agent = agent
        self._server = server
        self._lease = lease
        self._tokenizer = tokenizer
        self._session_id = session_id
        self._sample_id = sample_id
        self._system_prompt = system_prompt
        self._tools = tuple(tools)
        self._reset_options = dict(reset_options or {})
        self._template = template
        self._chat_format = chat_format
        self._priorities = priorities
        self._call_timeout_s = call_timeout_s
        self._tool_result_chars = tool_result_chars
        self._events: asyncio.Queue[_Call | _AgentEnded] = asyncio.Queue()
        self._token: str | None = None
        self._agent_task: asyncio.Task[None] | None = None
        self._chat: ChatPromptBuilder | None = None
        self._known: list[Message] = []
        self._pending: _Call | None = None
        self._turns = 0
        self._env_reward = 0.0
        self._env_done = False

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return self._builder().stop_token_ids()

    async def start(self) -> tuple[int, ...]:
        observation = ""
        if self._lease is not None:
            try:
                observation, _ = await self._lease.areset(options=self._reset_options)
            except SandboxError as exc:
                raise EnvSessionError(f"the env could not reset: {exc}") from exc
        endpoint = self._server.register(self._on_call)
        self._token = endpoint.token
        opening = [{"role": "user", "content": observation}] if observation else []
        if self._system_prompt:
            opening.insert(0, {"role": "system", "content": self._system_prompt})
        context = AgentContext(
            base_url=self._server.base_url(self._token),
            api_key=endpoint.api_key,
            model=self._server.model,
            sample_id=self._sample_id,
            messages=tuple(opening),
            tools=self._tools,
            step=self._env_step,
        )
        self._agent_task = asyncio.create_task(self._play(context), name=f"agent-{self._sample_id}")
        event = await self._next_event()
        if isinstance(event, _AgentEnded):
            cause = f": {event.error!r}" if event.error else ""
            raise EnvSessionError(f"the agent ended before its first chat call{cause}")
        try:
            messages, tools = _request(event.body)
        except MessageError as exc:
            event.reply.set_result(api_error(400, str(exc)))
            raise EnvSessionError(f"the agent's first call is malformed: {exc}") from exc
        self._pending = event
        self._known = list(messages)
        chat_format = self._chat_format
        if tools and (chat_format is None or not chat_format.use_tools(tools)):
            messages = tuple(_with_tools(messages, tools))  # a template without a tools block
        self._chat = ChatPromptBuilder(
            self._tokenizer,
            self._template,
            [(m.role, m.content) for m in messages],
            chat_format=chat_format,
        )
        return self._chat.open_turn()

    def peek_tool(self, generated_ids: Sequence[int]) -> str | None:
        calls = assistant_message(self._decode(generated_ids), self._turns).tool_calls
        return calls[0].name if calls else None

    async def act(self, generated_ids: Sequence[int], *, high: bool) -> ActOutcome:
        chat = self._builder()
        self.set_priority(high)
        prompt_tokens = len(chat.token_ids)
        chat.append_generated(generated_ids, [0.0] * len(generated_ids), version=0)
        chat.end_turn()
        answer = assistant_message(self._decode(generated_ids), self._turns)
        self._turns += 1
        self._known.append(answer)
        assert self._pending is not None
        served_s = time.monotonic() - self._pending.arrived_s
        self._pending.reply.set_result(
            (200, self._completion(answer, prompt_tokens, len(generated_ids), served_s))
        )
        self._pending = None
        started = time.monotonic()
        event = await self._next_event()
        act_s = time.monotonic() - started
        tool = answer.tool_calls[0].name if answer.tool_calls else None
        if isinstance(event, _AgentEnded):
            if event.error is not None:
                return ActOutcome(done=True, infra_error=f"agent_failed: {event.error!r}")
            reward = self._env_reward if event.reward is None else float(event.reward)
            return ActOutcome(
                done=True, reward=reward, terminated=True, act_s=act_s, tool_name=tool
            )
        try:
            messages, _ = _request(event.body)
        except MessageError as exc:
            event.reply.set_result(api_error(400, str(exc)))
            return ActOutcome(done=True, infra_error=f"agent_request_invalid: {exc}")
        step = continue_history(self._known, messages)
        if not isinstance(step, Continuation):
            event.reply.set_result(
                api_error(409, f"the history was rewritten ({step.reason}); this sample's "
                          "trajectory ended there, recorded as a fork", "conflict")
            )  # fmt: skip
            fork = {"at_message": step.at, "reason": step.reason, "turn": self._turns}
            return ActOutcome(
                done=True,
                truncated=True,
                reward=0.0,
                act_s=act_s,
                tool_name=tool,
                truncation_reason="history_fork",
                trajectory_info={"fork": fork},
            )
        before = len(chat.token_ids)
        for message in step.new:
            chat.add_message(message.role, message.content)
        chat.open_turn()
        self._known.extend(step.new)
        self._pending = event
        return ActOutcome(
            observation_ids=chat.token_ids[before:],
            act_s=act_s,
            tool_name=tool,
            tool_result=step.new[-1].content[: self._tool_result_chars],
        )

    def set_priority(self, high: bool) -> None:
        if self._lease is not None:
            self._lease.set_priority(self._priorities[0] if high else self._priorities[1])

    async def close(self) -> None:
        if self._token is not None:
            self._server.unregister(self._token)
        if self._pending is not None and not self._pending.reply.done():
            self._pending.reply.set_result(api_error(410, "the sample's episode is over", "gone"))
        while not self._events.empty():  # calls that raced the end: answer them too
            event = self._events.get_nowait()
            if isinstance(event, _Call) and not event.reply.done():
                event.reply.set_result(api_error(410, "the sample's episode is over", "gone"))
        if self._agent_task is not None:
            self._agent_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._agent_task
        if self._lease is not None:
            await self._lease.release()

    # -- internals ---------------------------------------------------------------------------

    async def _on_call(self, body: dict[str, Any]) -> ApiReply:
        reply: asyncio.Future[ApiReply] = asyncio.get_running_loop().create_future()
        await self._events.put(_Call(body, reply, time.monotonic()))
        return await reply

    async def _play(self, context: AgentContext) -> None:
        try:
            reward = await self._agent(context)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the agent's own failure: reported, never raised here
            await self._events.put(_AgentEnded(error=exc))
        else:
            await self._events.put(_AgentEnded(reward=reward))

    async def _next_event(self) -> _Call | _AgentEnded:
        try:
            return await asyncio.wait_for(self._events.get(), self._call_timeout_s)
        except TimeoutError:
            stalled = TimeoutError(f"no chat call and no end within {self._call_timeout_s:g} s")
            return _AgentEnded(error=stalled)

    async def _env_step(self, action: str) -> StepResult:
        if self._lease is None:
            raise RuntimeError("this sample has no env: the agent acts in its own world")
        observation, reward, terminated, truncated, info = await self._lease.astep(action)
        self._env_reward, self._env_done = float(reward), bool(terminated or truncated)
        return StepResult(observation, float(reward), self._env_done, info)

    def _completion(
        self, answer: Message, prompt_tokens: int, completion_tokens: int, served_s: float
    ) -> dict[str, Any]:
        """An OpenAI chat completion, plus SGLang-style `meta_info`: the sample's session and
        how long the call spent in the conductor (scheduling and generation)."""
        finish = "tool_calls" if answer.tool_calls else "stop"
        message = answer.to_openai()
        message["content"] = answer.content or None
        return {
            "id": f"chatcmpl-{self._session_id}-{self._turns}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._server.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "meta_info": {"session_id": self._session_id, "served_s": served_s},
        }

    def _builder(self) -> ChatPromptBuilder:
        return started_builder(self._chat)

    def _decode(self, ids: Sequence[int]) -> str:
        return model_text(self._tokenizer, ids, self._builder().stop_token_ids())


def _request(body: Mapping[str, Any]) -> tuple[tuple[Message, ...], list[Mapping[str, Any]]]:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise MessageError("`tools` must be a list of OpenAI function tools")
    return parse_messages(body.get("messages")), tools


def _with_tools(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The prompt messages, the tools block appended to the system message (or one added):
    for ChatML, which has none; a model's chat template renders `tools` itself."""
    if not tools:
        return list(messages)
    block = tools_system_text(tools)
    if messages and messages[0].role == "system":
        head = Message("system", f"{messages[0].content}\n\n{block}")
        return [head, *messages[1:]]
    return [Message("system", block), *messages]
