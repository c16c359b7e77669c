"""`python -m rollout.simulation.simulator_speed`: drive the sim engine with the synthetic workload.

A minimal driver, not the rollout layer: every sample of every group runs at once as
reset → (generate → env step)* in virtual time, with no scheduling policy of its own. Prints the
wall and CPU time the simulation took, the simulated time, token counts and the engine's busy
fraction, so the simulator's speed can be tracked (the figure that matters: CPU seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from foundation.config import load_config
from rollout.engines.base import GenerateRequest, SamplingParams
from rollout.engines.sim.config import SimEngineConfig
from rollout.engines.sim.engine import SimEngine
from rollout.engines.sim.factory import build_sim_engine
from rollout.engines.sim.served_model import ServedModelConfig
from rollout.simulation.vtime import run_virtual
from rollout.simulation.workload.config import WorkloadConfig
from rollout.simulation.workload.sim_env import SimEnv
from rollout.simulation.workload.workload import SyntheticWorkload

__all__ = ["BenchReport", "main", "run_bench"]

_DEFAULT_MODEL = "configs/model/qwen3_8b_h200.yaml"
_DEFAULT_WORKLOAD = "configs/workload/swe_like.yaml"
_DEFAULT_ENGINE = "configs/engine/sim.yaml"


@dataclass(frozen=True, slots=True)
class BenchReport:
    samples: int
    turns: int
    simulated_s: float
    wall_s: float
    cpu_s: float
    stats: dict[str, float]


async def _run_sample(engine: SimEngine, env: SimEnv, max_new_tokens: int, eos: int) -> int:
    """One trajectory, token in / token out; returns its number of turns."""
    context = await env.reset()
    sampling = SamplingParams(max_new_tokens=max_new_tokens, stop_token_ids=(eos,))
    turn = 0
    while True:
        result = await engine.generate(
            GenerateRequest(
                rid=f"{env.session_id}/t{turn}",
                input_ids=context,
                sampling=sampling,
                session_id=env.session_id,
            )
        )
        observation, done, _, _ = await env.step(result.output_ids)
        turn += 1
        if done:
            return turn
        context = context + result.output_ids + observation


async def _drive(
    engine: SimEngine, workload: SyntheticWorkload, groups: int, group_size: int
) -> tuple[int, float]:
    config = workload.config
    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks = []
    async with asyncio.TaskGroup() as group_tasks:
        for group in range(groups):
            for sample in range(group_size):
                env = workload.make_env(group, sample)
                tasks.append(
                    group_tasks.create_task(
                        _run_sample(engine, env, config.max_new_tokens, config.eos_token_id)
                    )
                )
    await engine.aclose()
    return sum(task.result() for task in tasks), loop.time() - start


def run_bench(
    engine_config: SimEngineConfig,
    model: ServedModelConfig,
    workload_config: WorkloadConfig,
    *,
    groups: int,
    group_size: int,
    seed: int,
) -> BenchReport:
    """Simulate `groups × group_size` samples; return timings and the engine's final stats."""
    if group_size > workload_config.group_size:
        raise ValueError(
            f"group_size {group_size} exceeds the workload's {workload_config.group_size}"
        )
    workload = SyntheticWorkload(workload_config, seed)
    engine = build_sim_engine(engine_config, model, workload.token_model())
    wall0, cpu0 = time.perf_counter(), time.process_time()
    turns, simulated_s = run_virtual(_drive(engine, workload, groups, group_size))
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    return BenchReport(
        samples=groups * group_size,
        turns=turns,
        simulated_s=simulated_s,
        wall_s=wall_s,
        cpu_s=cpu_s,
        stats=dict(engine.stats().extra),
    )


def _format(report: BenchReport, model: ServedModelConfig, workload: WorkloadConfig) -> str:
    s = report.stats
    decode = s["decode_tokens"] + s["admitted"]  # each completed prefill samples one token too
    prompt_seen = s["prefill_tokens"] + s["cached_tokens"]
    lines = [
        f"model {model.name} · workload {workload.name} · {report.samples} samples, "
        f"{report.turns} turns",
        f"wall {report.wall_s:.1f} s · CPU {report.cpu_s:.1f} s · simulated "
        f"{report.simulated_s:.0f} s ({report.simulated_s / max(report.wall_s, 1e-9):.0f}x "
        "faster than real time)",
        f"engine busy {s['busy_s']:.0f} s = {s['busy_s'] / max(report.simulated_s, 1e-9):.1%} of "
        f"simulated time · {s['prefill_steps']:.0f} prefill + {s['decode_steps']:.0f} decode steps",
        f"tokens: generated {decode:.0f} · prefilled {s['prefill_tokens']:.0f} · cached "
        f"{s['cached_tokens']:.0f} ({s['cached_tokens'] / max(prompt_seen, 1):.1%} of prompt "
        f"tokens; {s['host_hit_tokens']:.0f} from host)",
        f"decode {decode / max(report.simulated_s, 1e-9):.0f} tok/s simulated · retractions "
        f"{s['retractions']:.0f} · KV dropped {s['kv_dropped_tokens']:.0f}, offloaded "
        f"{s['kv_offloaded_tokens']:.0f}, loaded {s['kv_loaded_tokens']:.0f} tokens",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rollout.simulation.simulator_speed", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default=_DEFAULT_MODEL, help="served-model YAML")
    parser.add_argument("--workload", default=_DEFAULT_WORKLOAD, help="workload YAML")
    parser.add_argument("--engine", default=_DEFAULT_ENGINE, help="sim engine YAML")
    parser.add_argument("--groups", type=int, default=None, help="groups (default: workload's)")
    parser.add_argument("--group-size", type=int, default=None, help="samples per group")
    parser.add_argument("--seed", type=int, default=0, help="workload seed")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="engine config override"
    )
    args = parser.parse_args(argv)
    model = load_config(ServedModelConfig, args.model)
    workload = load_config(WorkloadConfig, args.workload)
    engine = load_config(SimEngineConfig, args.engine, args.set)
    report = run_bench(
        engine,
        model,
        workload,
        groups=args.groups or workload.num_groups,
        group_size=args.group_size or workload.group_size,
        seed=args.seed,
    )
    print(_format(report, model, workload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
