"""`FaultyEngine`: seeded, bounded fault injection around any engine."""

from __future__ import annotations

import asyncio

import pytest

from rollout.engines.base import GenerateRequest, GenerateResult, SamplingParams
from rollout.engines.faults import EngineFaultConfig, FaultyEngine


class _EchoEngine:
    name = "echo"

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        from rollout.engines.base import FinishReason

        return GenerateResult(request.rid, (1,), (0.0,), FinishReason.STOP, prompt_tokens=1)


def _request(index: int) -> GenerateRequest:
    return GenerateRequest(rid=f"r{index}", input_ids=(1, 2), sampling=SamplingParams(8))


async def _outcomes(config: EngineFaultConfig, calls: int = 40) -> list[str]:
    engine = FaultyEngine(_EchoEngine(), config)  # type: ignore[arg-type]
    seen = []
    for index in range(calls):
        try:
            async with asyncio.timeout(0.01):
                await engine.generate(_request(index))
            seen.append("ok")
        except ConnectionResetError:
            seen.append("reset")
        except TimeoutError:
            seen.append("hang")
    return seen


async def test_faults_replay_from_their_seed_and_stop_at_the_limit() -> None:
    config = EngineFaultConfig(reset_probability=0.2, hang_probability=0.2, seed=3)
    first, again = await _outcomes(config), await _outcomes(config)
    assert first == again and {"ok", "reset", "hang"} <= set(first)
    capped = await _outcomes(config.model_copy(update={"max_faults": 2}))
    assert sum(outcome != "ok" for outcome in capped) == 2


async def test_no_faults_by_default() -> None:
    assert not EngineFaultConfig().enabled
    assert set(await _outcomes(EngineFaultConfig(), calls=10)) == {"ok"}


def test_probabilities_are_validated() -> None:
    with pytest.raises(ValueError):
        EngineFaultConfig(reset_probability=1.5)
