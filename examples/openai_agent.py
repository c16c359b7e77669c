"""Bring your own agent: an OpenAI-SDK tool-calling loop, played by the conductor.

The conductor hands the agent one sample at a time (`AgentContext`): a base URL whose chat
completions are generations of that sample's trajectory (exact token ids, its priority and
KV hints), the opening messages, the env's tools, and `step` to run a tool call in the
sample's SWE sandbox. Run it against the simulated engine from the repository root:

    .venv/bin/conductor serve-agent-api examples/openai_agent.py:agent steps=1

(the agent never sees token ids: the trajectory holds them, docs/trainers.md).
"""

import json

from openai import AsyncOpenAI

from rollout.agent_api import AgentContext

MAX_CALLS = 30


async def agent(ctx: AgentContext) -> float | None:
    """Call the model, run its tool calls in the sandbox, until it submits."""
    client = AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key, max_retries=0)
    messages = [dict(message) for message in ctx.messages]
    try:
        for _ in range(MAX_CALLS):
            reply = await client.chat.completions.create(
                model=ctx.model, messages=messages, tools=list(ctx.tools)
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:  # no call: remind the model of its tools
                messages.append({"role": "user", "content": "Call one of the tools."})
                continue
            for call in message.tool_calls:
                action = {
                    "name": call.function.name,
                    "arguments": json.loads(call.function.arguments or "{}"),
                }
                result = await ctx.step(json.dumps(action))
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": result.observation}
                )
                if result.done:
                    return None  # the env graded the submission: take its reward
        return 0.0
    finally:
        await client.close()
