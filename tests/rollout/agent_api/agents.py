"""Agents for the capture tests (beside examples/openai_agent.py): one that rewrites its
history, one that crashes, one that brings its own reward, one that calls other samples, and one
that plays like the example agent and keeps every sample's final history (`RECORDED`) for the
test to read."""

from __future__ import annotations

import json
from typing import Any

from openai import APIStatusError, AsyncOpenAI

from rollout.agent_api import AgentContext

__all__ = ["INTRUSIONS", "RECORDED", "crashing", "intruder", "own_reward", "recording", "rewriting"]

RECORDED: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
"""sample id -> (its history: what `recording` sent and the model's replies, the tools it
offered); test state only."""


async def recording(ctx: AgentContext) -> float | None:
    """examples/openai_agent.py's loop (tools offered, tool calls run in the sandbox), keeping
    its history in `RECORDED[ctx.sample_id]`."""
    client = AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key, max_retries=0)
    messages: list[dict[str, Any]] = [dict(message) for message in ctx.messages]
    RECORDED[ctx.sample_id] = (messages, [dict(tool) for tool in ctx.tools])
    try:
        for _ in range(30):
            reply = await client.chat.completions.create(
                model=ctx.model, messages=messages, tools=list(ctx.tools)
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                messages.append({"role": "user", "content": "Call one of the tools."})
                continue
            for call in message.tool_calls:
                action = {
                    "name": call.function.name,
                    "arguments": json.loads(call.function.arguments),
                }
                result = await ctx.step(json.dumps(action))
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": result.observation}
                )
                if result.done:
                    return None
        return 0.0
    finally:
        await client.close()


async def rewriting(ctx: AgentContext) -> float | None:
    """Calls once, then calls again with the model's answer dropped (a history rewrite)."""
    client = AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key, max_retries=0)
    messages = [dict(message) for message in ctx.messages]
    try:
        await client.chat.completions.create(model=ctx.model, messages=messages)
        messages.append({"role": "user", "content": "Forget that; try again."})
        await client.chat.completions.create(model=ctx.model, messages=messages)
    finally:
        await client.close()
    return 1.0


async def crashing(ctx: AgentContext) -> float | None:
    await _one_call(ctx)
    raise RuntimeError("the agent's own bug")


async def own_reward(ctx: AgentContext) -> float | None:
    await _one_call(ctx)
    return 0.75


async def _one_call(ctx: AgentContext) -> None:
    """One chat call with the opening messages (the sample then has its first turn)."""
    client = AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key, max_retries=0)
    try:
        await client.chat.completions.create(model=ctx.model, messages=list(ctx.messages))
    finally:
        await client.close()


INTRUSIONS: list[int] = []
"""Status codes the intruder's calls to other samples got (read by the test)."""
_SEEN: dict[str, AgentContext] = {}


async def intruder(ctx: AgentContext) -> float | None:
    """Plays its own sample as examples/openai_agent.py does, but before each of its calls it
    sends a rewritten history to every other sample it has seen, with its own client."""
    from examples.openai_agent import agent

    _SEEN[ctx.sample_id] = ctx
    client = AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key, max_retries=0)
    try:
        for other in list(_SEEN.values()):
            if other.sample_id == ctx.sample_id:
                continue
            attack = AsyncOpenAI(base_url=other.base_url, api_key=ctx.api_key, max_retries=0)
            try:
                await attack.chat.completions.create(
                    model=ctx.model, messages=[{"role": "user", "content": "rewritten"}]
                )
                INTRUSIONS.append(200)
            except APIStatusError as exc:
                INTRUSIONS.append(exc.status_code)
            finally:
                await attack.close()
    finally:
        await client.close()
    return await agent(ctx)
