"""`python -m rollout.simulation.kv_bench`: plain LRU vs the priority KV policy, same workload.

Runs one synthetic workload and seed in virtual time on the simulated engine over the plain LRU
radix cache (`kv_backend: radix_lru`, as configured and again with write-back host writes, the
kvcache policies' rule) and over the kvcache manager (`kv_backend: kvcache`), with the same
engine settings (priority scheduling for all, since the priority backend needs it). A driver
stands in for the rollout layer: every sample runs reset → (generate → tool)* at once and sends
the session hints the agent loop sends (`open` with the first request, `tool_wait` with the
tool's median latency when a turn ends, `tool_done` when the tool returns, `close` after the
last turn); the first `--high-fraction` of the groups are high priority. Prints a side-by-side
table with policy/LRU ratios. All figures are SIMULATED.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from foundation.config import load_config
from rollout.engines.base import GenerateRequest, KVHint, KVHintKind, SamplingParams
from rollout.engines.sim.config import HostWritePolicy, KVBackendKind, SimEngineConfig
from rollout.engines.sim.engine import SimEngine
from rollout.engines.sim.factory import build_sim_engine, policy_kv_config
from rollout.engines.sim.served_model import ServedModelConfig
from rollout.simulation.vtime import run_virtual
from rollout.simulation.workload.config import WorkloadConfig
from rollout.simulation.workload.script import SUBMIT_TOOL
from rollout.simulation.workload.sim_env import SimEnv
from rollout.simulation.workload.workload import SyntheticWorkload

__all__ = [
    "BenchSetup",
    "Comparison",
    "KVBenchRun",
    "format_report",
    "main",
    "run_backend",
    "run_comparison",
]

_DEFAULT_MODEL = "configs/model/qwen3_32b_h200.yaml"  # the KV-tight one: a ~250k-token pool
_DEFAULT_WORKLOAD = "configs/workload/swe_like.yaml"
_DEFAULT_ENGINE = "configs/engine/sim.yaml"
_DEFAULT_GROUPS = 16
_DEFAULT_HIGH_FRACTION = 0.5
_HIGH_PRIORITY = 1  # engine priorities of the two classes (kvcache high_priority_min is 1)
_LOW_PRIORITY = 0
_GB = 1e9


@dataclass(frozen=True, slots=True)
class BenchSetup:
    """One comparison: the configs, how many groups run, and which of them are high priority."""

    engine: SimEngineConfig
    model: ServedModelConfig
    workload: WorkloadConfig
    groups: int
    group_size: int
    high_groups: int
    seed: int


@dataclass(slots=True)
class _Tally:
    """What the driver sees across samples (mutable, one per run)."""

    turns: int = 0
    first_misses: int = 0  # prompt tokens not cached at each turn's first admission
    session_recomputed: int = 0  # of which the session had computed before (its KV was lost)
    done_s: dict[bool, float] = field(default_factory=lambda: {True: 0.0, False: 0.0})


@dataclass(frozen=True, slots=True)
class KVBenchRun:
    """One run's outcome; `engine` is the engine's `stats().extra` at the end."""

    backend: str
    samples: int
    turns: int
    makespan_s: float
    high_done_s: float
    low_done_s: float
    session_recomputed_tokens: int
    retraction_recomputed_tokens: int
    wall_s: float
    cpu_s: float
    engine: Mapping[str, float]


def _expected_tool_s(workload: WorkloadConfig) -> dict[str, float]:
    """The latency the driver announces per tool: the median of its distribution."""
    return {tool.name: tool.latency_s.median for tool in workload.tools}


async def _run_sample(
    engine: SimEngine,
    env: SimEnv,
    priority: int,
    expected_s: Mapping[str, float],
    workload: WorkloadConfig,
    tally: _Tally,
) -> None:
    """One trajectory with the hints an agent loop sends."""
    session = env.session_id
    page = engine.kv.page_tokens
    sampling = SamplingParams(workload.max_new_tokens, stop_token_ids=(workload.eos_token_id,))
    hints: tuple[KVHint, ...] = (KVHint(KVHintKind.OPEN, session, priority),)
    context = await env.reset()
    computed = 0  # tokens of this session whose KV has been computed
    turn = 0
    while True:
        request = GenerateRequest(f"{session}/t{turn}", context, sampling, session, priority, hints)
        result = await engine.generate(request)
        hints = ()
        tally.turns += 1
        tally.first_misses += len(context) - result.cached_tokens
        tally.session_recomputed += max(0, computed // page * page - result.cached_tokens)
        computed = len(context) + len(result.output_ids) - 1
        tool = env.script.turns[turn].tool
        if tool == SUBMIT_TOOL:  # the trajectory is over: its KV is no longer needed
            await engine.send_kv_hints([KVHint(KVHintKind.CLOSE, session, priority)])
        else:
            wait = KVHint(KVHintKind.TOOL_WAIT, session, priority, expected_s.get(tool))
            await engine.send_kv_hints([wait])
        observation, done, _, _ = await env.step(result.output_ids)
        turn += 1
        if done:
            break
        await engine.send_kv_hints([KVHint(KVHintKind.TOOL_DONE, session, priority)])
        context = context + result.output_ids + observation
    if tool != SUBMIT_TOOL:
        await engine.send_kv_hints([KVHint(KVHintKind.CLOSE, session, priority)])
    high = priority == _HIGH_PRIORITY
    tally.done_s[high] = max(tally.done_s[high], asyncio.get_running_loop().time())


async def _drive(engine: SimEngine, workload: SyntheticWorkload, setup: BenchSetup) -> _Tally:
    tally = _Tally()
    expected = _expected_tool_s(setup.workload)
    async with asyncio.TaskGroup() as tasks:
        for group in range(setup.groups):
            priority = _HIGH_PRIORITY if group < setup.high_groups else _LOW_PRIORITY
            for sample in range(setup.group_size):
                env = workload.make_env(group, sample)
                tasks.create_task(
                    _run_sample(engine, env, priority, expected, setup.workload, tally)
                )
    await engine.aclose()
    return tally


def run_backend(
    setup: BenchSetup, backend: KVBackendKind, host_writes: HostWritePolicy | None = None
) -> KVBenchRun:
    """Simulate the setup's workload over one KV backend (a fresh workload, same seed).

    `host_writes` overrides the LRU backend's host write policy (None: the engine config's).
    """
    raw = {**setup.engine.model_dump(), "kv_backend": backend}
    if host_writes is not None:
        raw["host"] = {**raw["host"], "write_policy": host_writes}
    engine_config = SimEngineConfig.model_validate(raw)
    workload = SyntheticWorkload(setup.workload, setup.seed)
    engine = build_sim_engine(engine_config, setup.model, workload.token_model())
    wall0, cpu0 = time.perf_counter(), time.process_time()
    tally = run_virtual(_drive(engine, workload, setup))
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    extra = dict(engine.stats().extra)
    return KVBenchRun(
        backend=str(backend) if host_writes is None else f"{backend} ({host_writes})",
        samples=setup.groups * setup.group_size,
        turns=tally.turns,
        makespan_s=max(tally.done_s.values()),
        high_done_s=tally.done_s[True],
        low_done_s=tally.done_s[False],
        session_recomputed_tokens=tally.session_recomputed,
        retraction_recomputed_tokens=int(extra["prefill_tokens"]) - tally.first_misses,
        wall_s=wall_s,
        cpu_s=cpu_s,
        engine=extra,
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    """The runs of one setup: the LRU baseline as configured, LRU with write-back, the policy.

    LRU with write-back copies KV to host only on eviction, as the kvcache policies do, so the
    middle column separates the effect of the host write policy from that of the priority policy.
    """

    lru: KVBenchRun
    lru_write_back: KVBenchRun
    policy: KVBenchRun


def run_comparison(setup: BenchSetup) -> Comparison:
    """The three runs of the same workload and seed."""
    return Comparison(
        lru=run_backend(setup, KVBackendKind.RADIX_LRU),
        lru_write_back=run_backend(setup, KVBackendKind.RADIX_LRU, HostWritePolicy.WRITE_BACK),
        policy=run_backend(setup, KVBackendKind.KVCACHE),
    )


# ---- the table --------------------------------------------------------------------------------


def _hit_shares(report: KVBenchRun) -> tuple[float, float, float]:
    """(device, host, miss) shares of the prompt tokens seen at admission."""
    s = report.engine
    cached, host, missed = s["cached_tokens"], s["host_hit_tokens"], s["prefill_tokens"]
    total = max(cached + missed, 1.0)
    return (cached - host) / total, host / total, missed / total


def _rows(report: KVBenchRun) -> list[tuple[str, float | None, str]]:
    """(label, value, format) per table row; None: the backend does not track it."""
    s = report.engine
    device, host, miss = _hit_shares(report)
    busy = s["busy_s"] / max(report.makespan_s, 1e-9)

    def tracked(name: str) -> float | None:
        return s.get(name)

    return [
        ("KV hits on device (share of prompt tokens)", device, "{:.1%}"),
        ("KV hits on host", host, "{:.1%}"),
        ("KV misses (prefilled)", miss, "{:.1%}"),
        ("prefilled tokens", s["prefill_tokens"], "{:,.0f}"),
        ("recomputed: session KV lost (tokens)", report.session_recomputed_tokens, "{:,.0f}"),
        ("recomputed: after retraction (tokens)", report.retraction_recomputed_tokens, "{:,.0f}"),
        ("retractions", s["retractions"], "{:,.0f}"),
        ("bytes host→device (GB)", s["h2d_bytes"] / _GB, "{:,.1f}"),
        ("bytes device→host (GB)", s["d2h_bytes"] / _GB, "{:,.1f}"),
        ("KV dropped (tokens)", s["kv_dropped_tokens"], "{:,.0f}"),
        ("offloads (node copies to host)", tracked("kv_offloads"), "{:,.0f}"),
        ("prefetches", tracked("kv_prefetches"), "{:,.0f}"),
        ("prefetches in time", tracked("kv_prefetches_in_time"), "{:,.0f}"),
        ("makespan (simulated s)", report.makespan_s, "{:,.0f}"),
        ("high-priority groups done (s)", report.high_done_s, "{:,.0f}"),
        ("low-priority groups done (s)", report.low_done_s, "{:,.0f}"),
        ("engine busy fraction", busy, "{:.1%}"),
        ("simulator CPU time (s)", report.cpu_s, "{:.1f}"),
    ]


def _cell(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


def _ratio(policy: float | None, lru: float | None) -> str:
    if policy is None or lru is None:
        return "—"
    if lru == 0:
        return "—" if policy == 0 else "new"
    return f"{policy / lru:.2f}x"


def format_report(setup: BenchSetup, runs: Comparison) -> str:
    """The parameters and the side-by-side table, as printed."""
    model, engine, workload = setup.model, setup.engine, setup.workload
    kv_config = policy_kv_config(engine, model)
    cost = model.cost
    lines = [
        "SIMULATED results: virtual time on the sim engine's calibrated cost model, not a "
        "measurement on hardware.",
        f"model {model.name} on {model.gpu.name}: KV pool {kv_config.device_capacity_tokens:,} "
        f"tokens, host tier {kv_config.host_capacity_tokens:,} tokens, "
        f"{model.kv_bytes_per_token:,} B/token, page {engine.page_tokens} tokens",
        f"cost: t_fix {cost.t_fix_s * 1e3:.2f} ms, t_weights {cost.t_weights_s * 1e3:.2f} ms, "
        f"b_c {cost.b_c_s * 1e6:.1f} us, b_tok {cost.b_tok_s * 1e6:.1f} us, "
        f"c_dec {cost.c_dec_s * 1e9:.1f} ns, c_pf {cost.c_pf_s * 1e9:.2f} ns; link "
        f"h2d {engine.link.h2d_gb_per_s:g} GB/s, d2h {engine.link.d2h_gb_per_s:g} GB/s, "
        f"{engine.link.latency_s * 1e6:g} us/copy",
        f"engine: schedule {engine.schedule_policy}, retraction {engine.retraction_policy}, "
        f"max running {engine.max_running_requests}; kvcache policy "
        f"'{engine.kvcache.policy}', tool-wait offload "
        f"{engine.kvcache.tool_wait_offload}, prefetch margin {engine.kvcache.prefetch_margin_s} s",
        f"workload {workload.name} seed {setup.seed}: {setup.groups} groups x {setup.group_size} "
        f"samples ({setup.high_groups} of {setup.groups} groups high priority), "
        f"{runs.lru.turns} turns; "
        "tool_wait announces each tool's median latency",
        f"columns: LRU = kv_backend lru as configured (host writes {engine.host.write_policy}); "
        "LRU-wb = the same with write_back; priority = kv_backend priority",
        "",
    ]
    rows = zip(_rows(runs.lru), _rows(runs.lru_write_back), _rows(runs.policy), strict=True)
    table = list(rows)
    width = max(len(label) for (label, _, _), _, _ in table)
    lines.append(
        f"{'':<{width}}  {'LRU':>13}  {'LRU-wb':>13}  {'priority':>13}  "
        f"{'prio/LRU':>9}  {'prio/LRU-wb':>11}"
    )
    for (label, lru, fmt), (_, write_back, _), (_, policy, _) in table:
        lines.append(
            f"{label:<{width}}  {_cell(lru, fmt):>13}  {_cell(write_back, fmt):>13}  "
            f"{_cell(policy, fmt):>13}  {_ratio(policy, lru):>9}  "
            f"{_ratio(policy, write_back):>11}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rollout.simulation.kv_bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default=_DEFAULT_MODEL, help="served-model YAML")
    parser.add_argument("--workload", default=_DEFAULT_WORKLOAD, help="workload YAML")
    parser.add_argument("--engine", default=_DEFAULT_ENGINE, help="sim engine YAML")
    parser.add_argument("--groups", type=int, default=_DEFAULT_GROUPS, help="groups to run")
    parser.add_argument("--group-size", type=int, default=None, help="samples per group")
    parser.add_argument(
        "--high-fraction",
        type=float,
        default=_DEFAULT_HIGH_FRACTION,
        help="share of the groups (the first ones) that are high priority",
    )
    parser.add_argument("--seed", type=int, default=0, help="workload seed")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="engine config override"
    )
    args = parser.parse_args(argv)
    if args.groups < 1 or not 0.0 <= args.high_fraction <= 1.0:
        parser.error("need --groups >= 1 and 0 <= --high-fraction <= 1")
    model = load_config(ServedModelConfig, args.model)
    workload = load_config(WorkloadConfig, args.workload)
    engine = load_config(SimEngineConfig, args.engine, ["schedule_policy=priority", *args.set])
    group_size = args.group_size or workload.group_size
    if not 1 <= group_size <= workload.group_size:
        parser.error(f"--group-size must be in 1..{workload.group_size}")
    setup = BenchSetup(
        engine=engine,
        model=model,
        workload=workload,
        groups=args.groups,
        group_size=group_size,
        high_groups=round(args.groups * args.high_fraction),
        seed=args.seed,
    )
    print(format_report(setup, run_comparison(setup)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
