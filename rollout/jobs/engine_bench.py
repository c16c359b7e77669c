"""`conductor bench engine`: what the SGLang HTTP client adds to a turn, against the in-process
engine, at several numbers of concurrent sessions.

Both sides drive the same simulated engine (serve-sim's config, the same filler model). With
`cost="model"` it paces itself on the served model's cost model, as a GPU would; with
`cost="zero"` every coefficient is 0, so a turn's latency is pure overhead: in process, the
engine's own scheduling; over HTTP, that plus the client (JSON of the whole context, aiohttp),
localhost TCP and the server (aiohttp, JSON back) in another process. Each session runs
`turns` turns whose prompt grows by the last output and an observation, as an agent's does.
Reported per concurrency: p50 and p99 of the per-turn latency on each side, and the difference
(the added overhead).
CPU per turn is reported too (this process, and the server process for HTTP): at many
sessions on few cores, latency is mostly queueing behind other sessions' CPU work, and CPU per
turn is what decides how many sessions a core can drive. `stats()` is also counted: the
scheduler calls it on every decision and it must make no HTTP call.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from foundation.config import load_config
from rollout.engines.base import Engine, GenerateRequest, SamplingParams
from rollout.engines.sglang import SGLangEngine, SGLangEngineConfig
from rollout.jobs.serve_sim import ServeSimConfig, build_sim_server, spawn_serve_sim

__all__ = ["EngineBenchConfig", "EngineBenchRow", "run_engine_bench"]

# Every cost-model coefficient at 0: the engine computes in no time, so latency is overhead.
ZERO_COST = tuple(
    f"cost.{name}=0" for name in ("t_fix_s", "t_weights_s", "b_c_s", "b_tok_s", "c_dec_s", "c_pf_s")
)


@dataclass(frozen=True, slots=True)
class EngineBenchConfig:
    serve_sim_config: Path
    sessions: tuple[int, ...] = (1, 64, 256)
    turns: int = 8
    prompt_tokens: int = 2048
    observation_tokens: int = 256
    max_new_tokens: int = 16
    cost: Literal["model", "zero"] = "model"
    seed: int = 0


@dataclass(frozen=True, slots=True)
class EngineBenchRow:
    sessions: int
    turns: int
    in_process_ms: tuple[float, float]  # p50, p99
    http_ms: tuple[float, float]
    added_ms: tuple[float, float]  # http - in process, at each percentile
    in_process_cpu_ms: float  # CPU per turn of the in-process engine (this process)
    client_cpu_ms: float  # CPU per turn of this process driving the HTTP client
    server_cpu_ms: float  # CPU per turn of the serve-sim process
    stats_http_calls: int  # HTTP calls made by 10,000 stats() calls


async def run_engine_bench(
    config: EngineBenchConfig, *, progress: Callable[[str], None] = lambda _: None
) -> list[EngineBenchRow]:
    """Measure every concurrency of `config.sessions`, in process then over HTTP."""
    rows = []
    async with _served(config) as (url, server_pid):
        for sessions in config.sessions:
            progress(f"{sessions} sessions, in process")
            local, local_cpu = await _in_process(config, sessions)
            progress(f"{sessions} sessions, over HTTP")
            server_cpu = _process_cpu_s(server_pid)
            remote, client_cpu, stats_calls = await _over_http(config, sessions, url)
            server_cpu = _process_cpu_s(server_pid) - server_cpu
            local_ms, remote_ms = _percentiles(local), _percentiles(remote)
            rows.append(
                EngineBenchRow(
                    sessions=sessions,
                    turns=len(local),
                    in_process_ms=local_ms,
                    http_ms=remote_ms,
                    added_ms=(remote_ms[0] - local_ms[0], remote_ms[1] - local_ms[1]),
                    in_process_cpu_ms=1000 * local_cpu / len(local),
                    client_cpu_ms=1000 * client_cpu / len(remote),
                    server_cpu_ms=1000 * server_cpu / len(remote),
                    stats_http_calls=stats_calls,
                )
            )
    return rows


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve_sim_settings(config: EngineBenchConfig, port: int) -> ServeSimConfig:
    settings = load_config(ServeSimConfig, config.serve_sim_config, [f"port={port}"])
    if config.cost == "model":
        return settings
    model = settings.model.model_copy(update={"overrides": (*settings.model.overrides, *ZERO_COST)})
    return settings.model_copy(update={"model": model})


async def _in_process(config: EngineBenchConfig, sessions: int) -> tuple[list[float], float]:
    parts = build_sim_server(_serve_sim_settings(config, 0), config.serve_sim_config.parent)
    engine = parts.server.engine
    try:
        return await _drive(engine, config, sessions)
    finally:
        await engine.aclose()


async def _over_http(
    config: EngineBenchConfig, sessions: int, url: str
) -> tuple[list[float], float, int]:
    client_config = SGLangEngineConfig(endpoints=(url,), poll_interval_s=0.5)
    engine = await SGLangEngine.connect(client_config)
    try:
        latencies, cpu_s = await _drive(engine, config, sessions)
        before = engine.transport.calls
        for _ in range(10_000):
            engine.stats()
        return latencies, cpu_s, engine.transport.calls - before
    finally:
        await engine.aclose()


async def _drive(
    engine: Engine, config: EngineBenchConfig, sessions: int
) -> tuple[list[float], float]:
    """Per-turn latencies (s) and this process's CPU seconds while the sessions ran."""
    rng = random.Random(config.seed)
    rids = itertools.count()
    latencies: list[float] = []

    async def session(index: int) -> None:
        context = [rng.randrange(256) for _ in range(config.prompt_tokens)]
        for _ in range(config.turns):
            request = GenerateRequest(
                rid=f"bench-{next(rids):08d}",
                input_ids=tuple(context),
                sampling=SamplingParams(
                    max_new_tokens=config.max_new_tokens, stop_token_ids=(256,)
                ),
                session_id=f"bench-session-{index}",
            )
            started = time.perf_counter()
            result = await engine.generate(request)
            latencies.append(time.perf_counter() - started)
            context += [
                *result.output_ids,
                *(rng.randrange(256) for _ in range(config.observation_tokens)),
            ]

    cpu_s = time.process_time()
    await asyncio.gather(*(session(i) for i in range(sessions)))
    return latencies, time.process_time() - cpu_s


def _percentiles(latencies: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p99 * 1000


@contextlib.asynccontextmanager
async def _served(config: EngineBenchConfig) -> AsyncIterator[tuple[str, int]]:
    """serve-sim with the zeroed cost model, in its own process (as a real server would be)."""
    model_overrides = ", ".join(_serve_sim_settings(config, 0).model.overrides)
    url, process = spawn_serve_sim(
        [f"model.overrides=[{model_overrides}]"], config=config.serve_sim_config
    )
    try:
        probe_config = SGLangEngineConfig(endpoints=(url,), startup_timeout_s=60)
        engine = await SGLangEngine.connect(probe_config)  # waits until it answers
        await engine.aclose()
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)
