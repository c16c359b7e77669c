"""What the capture endpoint adds to each chat call, with N bring-your-own agents at once.

    python scripts/agent_api_latency.py [--agents 64] [--calls 6]

Runs one `conductor run` step whose samples are all played by a small OpenAI-SDK agent (the
real `openai` client over HTTP; it makes `--calls` chat calls with canned tool results, then
returns its own reward), on the simulated engine and local sandboxes. For every call it takes
the client's wall time minus the time the call spent in the conductor (scheduling and
generation, `meta_info.served_s`): the latency the endpoint adds (HTTP, the SDK, message
checks and rendering). Prints p50 / p99 / max of that, over all calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from openai import AsyncOpenAI

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from foundation.config import load_config  # noqa: E402
from rollout.agent_api import AgentContext  # noqa: E402
from rollout.cli.run import DEFAULT_RUN_CONFIG  # noqa: E402
from rollout.jobs.config import RunConfig  # noqa: E402
from rollout.jobs.run_job import run_job  # noqa: E402
from rollout.jobs.run_plan import plan_run_config  # noqa: E402

ADDED_S: list[tuple[int, float]] = []  # (call index, seconds added)
PROMPT_CHARS = [0]  # the size of the opening messages the agents got (for the floor)
CALLS = 6


async def measuring_agent(ctx: AgentContext) -> float | None:
    """`CALLS` chat calls, each answered with a canned tool result; records the added time."""
    client = AsyncOpenAI(base_url=ctx.base_url, api_key=ctx.api_key, max_retries=0)
    messages = [dict(message) for message in ctx.messages]
    PROMPT_CHARS[0] = sum(len(str(m.get("content", ""))) for m in messages)
    try:
        for index in range(CALLS):
            started = time.monotonic()
            reply = await client.chat.completions.create(model=ctx.model, messages=messages)
            elapsed = time.monotonic() - started
            served = float((reply.model_extra or {})["meta_info"]["served_s"])
            ADDED_S.append((index, elapsed - served))
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "user", "content": f"tool output {index}"})
    finally:
        await client.close()
    return 1.0


async def floor_ms(agents: int, prompt_chars: int) -> tuple[float, float]:
    """(p50, p99) of the same calls against a server that answers at once with a canned
    reply: `agents` clients at once, the same number of calls and message sizes. What the
    SDK and HTTP alone cost at this concurrency, on this machine (one process, 2 cores)."""
    from rollout.agent_api.server import AgentApiServer

    message = {"role": "assistant", "content": "ok"}
    canned = {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }  # fmt: skip

    async def answer(body: dict[str, object]) -> tuple[int, dict[str, object]]:
        return 200, canned

    times: list[float] = []
    async with AgentApiServer() as server:

        async def client_loop() -> None:
            endpoint = server.register(answer)
            client = AsyncOpenAI(
                base_url=server.base_url(endpoint.token), api_key=endpoint.api_key, max_retries=0
            )
            messages: list[dict[str, str]] = [{"role": "user", "content": "x" * prompt_chars}]
            for index in range(CALLS):
                started = time.monotonic()
                await client.chat.completions.create(model="m", messages=messages)
                times.append(1000 * (time.monotonic() - started))
                messages += [message, {"role": "user", "content": f"tool output {index}"}]
            await client.close()

        await asyncio.gather(*(client_loop() for _ in range(agents)))
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))]


async def main(agents: int) -> None:
    group_size = 4
    config = load_config(
        RunConfig,
        DEFAULT_RUN_CONFIG,
        [
            "steps=1", f"groups_per_step={agents // group_size}", f"group_size={group_size}",
            "async_factor=0", "policy=sync",
            f"scripted.actions={json.dumps(['thinking about it'])}",
            "agent_api.agent=__main__:measuring_agent",  # this module: its ADDED_S collects
            f"pool.overrides=[backend=local, warm_per_image=0, max_live={agents + 8}, "
            f"act_slots={agents}]",
            "model.overrides=[cost.t_weights_s=0.0005]", "trainer.train_time_s=0.1",
            f"agent_loop.max_turns={CALLS + 2}",
        ],
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        started = time.monotonic()
        await run_job(plan_run_config(config, DEFAULT_RUN_CONFIG.parent), Path(out) / "run")
        elapsed = time.monotonic() - started
    print(
        f"{agents} agents at once, {len(ADDED_S)} chat calls in {elapsed:.1f} s (simulated "
        "engine, local sandboxes); added latency per call:"
    )
    p50, p99 = await floor_ms(agents, PROMPT_CHARS[0])
    print(f"  floor (canned replies, same load) p50 {p50:6.1f} ms   p99 {p99:6.1f} ms")
    for label, keep in (("all calls", lambda i: True), ("after the first", lambda i: i > 0)):
        added_ms = sorted(1000 * value for index, value in ADDED_S if keep(index))
        p99 = added_ms[min(len(added_ms) - 1, int(0.99 * len(added_ms)))]
        print(
            f"  {label:16s} p50 {statistics.median(added_ms):6.1f} ms   p99 {p99:6.1f} ms   "
            f"max {added_ms[-1]:6.1f} ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=64, help="concurrent agents (samples)")
    parser.add_argument("--calls", type=int, default=CALLS, help="chat calls per agent")
    arguments = parser.parse_args()
    CALLS = arguments.calls
    asyncio.run(main(arguments.agents))
