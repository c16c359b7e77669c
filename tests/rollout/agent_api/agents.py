"""Agents for the capture tests (beside examples/openai_agent.py): one that rewrites its
history, one that crashes, one that brings its own reward."""

from __future__ import annotations

from openai import AsyncOpenAI

from rollout.agent_api import AgentContext

__all__ = ["crashing", "own_reward", "rewriting"]


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
