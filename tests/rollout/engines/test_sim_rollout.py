"""The sim engine driven by the synthetic workload: repeatable runs, the benchmark entry point."""

from __future__ import annotations

import asyncio

import pytest

from foundation.config import load_config
from rollout.engines.base import GenerateRequest, SamplingParams
from rollout.engines.sim import ServedModelConfig, SimEngineConfig, build_sim_engine
from rollout.simulation.simulator_speed import main as bench_main
from rollout.simulation.vtime import run_virtual
from rollout.simulation.workload import SyntheticWorkload, WorkloadConfig
from tests.paths import CONFIGS


def rollout_log(seed: int) -> list[tuple[str, tuple[int, ...], float]]:
    """Run 2 groups × 3 samples of swe_like; log (rid, output ids, finish time) in finish order."""
    model = load_config(ServedModelConfig, CONFIGS / "model" / "qwen3_8b_h200.yaml")
    engine_config = load_config(SimEngineConfig, CONFIGS / "engine" / "sim.yaml")
    workload_config = load_config(
        WorkloadConfig, CONFIGS / "workload" / "swe_like.yaml", ["turns.median=6"]
    )
    workload = SyntheticWorkload(workload_config, seed)
    engine = build_sim_engine(engine_config, model, workload.token_model())
    log: list[tuple[str, tuple[int, ...], float]] = []

    async def sample(group: int, index: int) -> None:
        env = workload.make_env(group, index)
        context = await env.reset()
        for turn in range(1000):
            rid = f"{env.session_id}/{turn}"
            result = await engine.generate(
                GenerateRequest(
                    rid, context, SamplingParams(4096, stop_token_ids=(151645,)), env.session_id
                )
            )
            log.append((rid, result.output_ids, asyncio.get_running_loop().time()))
            observation, done, _, _ = await env.step(result.output_ids)
            if done:
                return
            context = context + result.output_ids + observation

    async def all_samples() -> None:
        async with asyncio.TaskGroup() as tasks:
            for group in range(2):
                for index in range(3):
                    tasks.create_task(sample(group, index))

    run_virtual(all_samples())
    return log


def test_a_simulated_rollout_is_identical_for_the_same_seed() -> None:
    assert rollout_log(seed=3) == rollout_log(seed=3)


def test_a_different_seed_gives_a_different_rollout() -> None:
    assert rollout_log(seed=3) != rollout_log(seed=4)


def test_the_benchmark_prints_timings_and_engine_busy_fraction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    workload = str(CONFIGS / "workload" / "short_context.yaml")
    assert bench_main(["--workload", workload, "--groups", "2", "--group-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "simulated" in out
    assert "engine busy" in out


def test_a_turn_aborted_and_resumed_with_its_partial_output_ends_as_if_never_aborted() -> None:
    def turn_output(abort_after_s: float | None) -> tuple[int, tuple[int, ...]]:
        """(tokens before the abort, the whole turn's output)."""
        model = load_config(ServedModelConfig, CONFIGS / "model" / "qwen3_8b_h200.yaml")
        engine_config = load_config(SimEngineConfig, CONFIGS / "engine" / "sim.yaml")
        workload_config = load_config(
            WorkloadConfig, CONFIGS / "workload" / "swe_like.yaml", ["output_tokens.median=2000"]
        )
        workload = SyntheticWorkload(workload_config, 0)
        engine = build_sim_engine(engine_config, model, workload.token_model())
        env = workload.make_env(0, 0)
        sampling = SamplingParams(8192, stop_token_ids=(151645,))

        async def main() -> tuple[int, tuple[int, ...]]:
            prompt = await env.reset()
            first = GenerateRequest("t0", prompt, sampling, env.session_id)
            if abort_after_s is None:
                output = (await engine.generate(first)).output_ids
                return len(output), output
            task = asyncio.create_task(engine.generate(first))
            await asyncio.sleep(abort_after_s)
            await engine.abort("t0")
            partial = (await task).output_ids
            rest = await engine.generate(
                GenerateRequest("t0-resumed", prompt + partial, sampling, env.session_id)
            )
            return len(partial), partial + rest.output_ids

        return run_virtual(main())

    partial_tokens, resumed = turn_output(abort_after_s=1.0)
    whole_tokens, whole = turn_output(abort_after_s=None)
    assert 0 < partial_tokens < whole_tokens
    assert resumed == whole
