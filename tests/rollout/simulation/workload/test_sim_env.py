"""SimEnv replays its script in virtual time; ScriptedTokenModel writes the scripted turns."""

from __future__ import annotations

import asyncio

import pytest

from foundation.config import load_config
from rollout.engines.base import FinishReason, GenerateRequest, SamplingParams
from rollout.simulation.vtime import run_virtual
from rollout.simulation.workload import SyntheticWorkload, TokenCorpus, WorkloadConfig
from tests.paths import CONFIGS

CONFIG = load_config(
    WorkloadConfig,
    CONFIGS / "workload" / "swe_like.yaml",
    ["corpus_tokens=65536"],
)


def test_reset_waits_the_start_up_time_and_returns_the_prompt() -> None:
    env = SyntheticWorkload(CONFIG, 0).make_env(0, 0)

    async def main() -> tuple[tuple[int, ...], float]:
        prompt = await env.reset()
        return prompt, asyncio.get_running_loop().time()

    prompt, now = run_virtual(main())
    assert prompt == env.script.prompt_ids
    assert now == pytest.approx(env.script.reset_s)


def test_each_step_waits_the_tool_latency_and_returns_the_scripted_observation() -> None:
    env = SyntheticWorkload(CONFIG, 0).make_env(0, 1)
    first = env.script.turns[0]

    async def main() -> tuple[int, bool, float]:
        await env.reset()
        start = asyncio.get_running_loop().time()
        observation, done, _, _ = await env.step((1, 2, 3))
        return len(observation), done, asyncio.get_running_loop().time() - start

    length, done, waited = run_virtual(main())
    assert (length, done) == (first.observation_tokens, False)
    assert waited == pytest.approx(first.tool_latency_s)


def test_the_episode_ends_after_the_last_turn_with_the_scripted_reward() -> None:
    env = SyntheticWorkload(CONFIG, 0).make_env(1, 0)

    async def main() -> list[tuple[bool, float]]:
        await env.reset()
        return [
            (done, reward) for _, done, reward, _ in [await env.step(()) for _ in env.script.turns]
        ]

    outcomes = run_virtual(main())
    assert outcomes[-1] == (True, env.script.reward)
    assert not any(done for done, _ in outcomes[:-1])


def test_stepping_without_a_running_episode_says_to_reset() -> None:
    env = SyntheticWorkload(CONFIG, 0).make_env(0, 0)
    with pytest.raises(RuntimeError, match="reset"):
        run_virtual(env.step(()))


def request(rid: str, session: str, ids: tuple[int, ...]) -> GenerateRequest:
    return GenerateRequest(rid, ids, SamplingParams(8192, stop_token_ids=(99,)), session)


def test_the_token_model_writes_each_turn_with_its_scripted_length_ending_in_the_stop_token() -> (
    None
):
    workload = SyntheticWorkload(CONFIG, 0)
    env = workload.make_env(0, 2)
    model = workload.token_model()
    first = model.plan(request("t0", env.session_id, env.script.prompt_ids))
    model.on_finish(
        request("t0", env.session_id, env.script.prompt_ids),
        len(first.output_ids),
        FinishReason.STOP,
    )
    second = model.plan(request("t1", env.session_id, env.script.prompt_ids + first.output_ids))
    assert [len(first.output_ids), len(second.output_ids)] == [
        env.script.turns[0].output_tokens,
        env.script.turns[1].output_tokens,
    ]
    assert first.output_ids[-1] == 99
    assert all(logprob < 0 for logprob in first.output_logprobs)


def test_an_aborted_turn_resumes_where_it_stopped_when_prompt_and_partial_are_resubmitted() -> None:
    workload = SyntheticWorkload(CONFIG, 0)
    env = workload.make_env(0, 3)
    model = workload.token_model()
    prompt = env.script.prompt_ids
    whole = model.plan(request("t0", env.session_id, prompt))
    model.on_finish(request("t0", env.session_id, prompt), 2, FinishReason.ABORT)
    rest = model.plan(request("t0b", env.session_id, prompt + whole.output_ids[:2]))
    assert whole.output_ids[:2] + rest.output_ids == whole.output_ids


def test_a_session_without_a_script_still_gets_a_stopping_turn() -> None:
    model = SyntheticWorkload(CONFIG, 0).token_model()
    plan = model.plan(request("x", "unknown-session", (1, 2, 3)))
    assert plan.ends_with_stop and plan.output_ids[-1] == 99


def test_corpus_ids_stay_in_the_vocabulary_and_avoid_reserved_ids() -> None:
    corpus = TokenCorpus(seed=0, vocab_size=50, size=5000, reserved_ids=(7, 8))
    ids = corpus.ids(4990, 30)  # wraps around the pool
    assert len(ids) == 30
    assert all(0 <= i < 50 and i not in (7, 8) for i in corpus.ids(0, 5000))
