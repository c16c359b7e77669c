"""Env sessions: token-level sim envs pass ids through; text envs render chat append-only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from envs.example.env import FileCheckEnv
from harness.backends import LocalBackend
from harness.errors import SandboxError
from harness.events import EventBus, EventRecorder, Phase
from harness.handle import SandboxHandle
from harness.pool import EnvPool, PoolConfig
from harness.sandbox import ExecLimits
from rollout.core.predictors.base import SampleContext
from rollout.core.types import Group
from rollout.runtime.env_session import SampleRef, TextEnvSession
from rollout.runtime.pool_sessions import PooledEnv, PoolSessions
from rollout.simulation.sessions import SimWorkloadSessions
from rollout.simulation.workload import SyntheticWorkload
from rollout.trajectories.tokenizer import ByteTokenizer, ChatPromptBuilder
from tests.rollout.fakes import workload_config

TOKENIZER = ByteTokenizer()
IM_END = TOKENIZER.special_token_id("<|im_end|>")
SAMPLE = SampleRef("g0-a0-s0", Group("g0", prompt_index=0, size=1, admitted_step=0), index=0)
StepReturn = tuple[str, float, bool, bool, dict[str, Any]]


class FakeLease:
    """An `EnvLease` stand-in: replays `steps` and records what the session did."""

    def __init__(self, steps: Sequence[StepReturn | Exception], first: str = "Fix it.") -> None:
        self._steps = list(steps)
        self._first = first
        self.actions: list[str] = []
        self.priority = 0
        self.infra_error: str | None = None
        self.released = False

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        return self._first, {}

    async def astep(self, action: str) -> StepReturn:
        self.actions.append(action)
        step = self._steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    def set_priority(self, priority: int) -> None:
        self.priority = priority

    async def release(self) -> None:
        self.released = True


def text_session(lease: FakeLease) -> TextEnvSession:
    return TextEnvSession(
        lease,  # type: ignore[arg-type]
        TOKENIZER,
        session_id="s0",
        system_prompt="You fix bugs.",
        priorities=(1, 0),
    )


async def test_the_first_prompt_is_the_chat_rendering_of_the_first_observation() -> None:
    session = text_session(FakeLease([]))
    expected = ChatPromptBuilder(
        TOKENIZER, messages=[("system", "You fix bugs."), ("user", "Fix it.")]
    ).open_turn()
    assert await session.start() == expected


async def test_the_env_gets_the_decoded_text_without_the_stop_token() -> None:
    lease = FakeLease([("out", 0.0, False, False, {})])
    session = text_session(lease)
    await session.start()
    await session.act([*TOKENIZER.encode("ls -la"), IM_END], high=False)
    assert lease.actions == ["ls -la"]


async def test_an_action_appends_only_template_and_observation_tokens() -> None:
    session = text_session(FakeLease([("file.txt", 0.0, False, False, {"tool": "bash"})]))
    prompt = await session.start()
    generated = (*TOKENIZER.encode("ls"), IM_END)
    outcome = await session.act(generated, high=False)
    assert prompt + generated + outcome.observation_ids == session.chat.token_ids
    assert TOKENIZER.decode(outcome.observation_ids) == (
        "\n<|im_start|>tool\nfile.txt<|im_end|>\n<|im_start|>assistant\n"
    )
    assert outcome.tool_name == "bash" and not outcome.done


async def test_generated_ids_stay_verbatim_even_when_text_does_not_round_trip() -> None:
    session = text_session(FakeLease([("?", 0.0, False, False, {})]))
    prompt = await session.start()
    generated = (0xFF, 0xFE, IM_END)  # invalid UTF-8: decoding and re-encoding changes it
    assert TOKENIZER.encode(TOKENIZER.decode(generated[:2])) != list(generated[:2])
    await session.act(generated, high=False)
    assert session.chat.token_ids[len(prompt) : len(prompt) + 3] == generated


async def test_the_last_action_returns_the_reward_and_no_observation() -> None:
    session = text_session(FakeLease([("graded", 1.0, True, False, {"tool": "submit"})]))
    await session.start()
    outcome = await session.act(TOKENIZER.encode("submit"), high=False)
    assert outcome.done and outcome.terminated and outcome.reward == 1.0
    assert outcome.observation_ids == ()


async def test_an_infra_error_in_the_step_info_is_a_value() -> None:
    info = {"infra_error": {"code": "agent_sandbox_dead", "message": "gone"}}
    session = text_session(FakeLease([("over", 0.0, False, True, info)]))
    await session.start()
    outcome = await session.act(TOKENIZER.encode("ls"), high=False)
    assert outcome.done and outcome.infra_error == "agent_sandbox_dead: gone"


async def test_a_sandbox_error_during_an_action_is_an_infra_error() -> None:
    session = text_session(FakeLease([SandboxError("daemon restarted")]))
    await session.start()
    outcome = await session.act(TOKENIZER.encode("ls"), high=False)
    assert outcome.done and outcome.infra_error == "sandbox_error: daemon restarted"


async def test_priority_changes_move_the_lease_between_act_slot_classes() -> None:
    lease = FakeLease([("out", 0.0, False, False, {})])
    session = text_session(lease)
    session.set_priority(True)
    assert lease.priority == 1
    await session.start()
    await session.act(TOKENIZER.encode("ls"), high=False)
    assert lease.priority == 0


async def test_a_sim_session_passes_ids_straight_through() -> None:
    workload = SyntheticWorkload(workload_config(1), seed=1)
    bus, recorder = EventBus(), EventRecorder()
    bus.subscribe(recorder)
    sessions = SimWorkloadSessions(workload, workload.token_model(), bus=bus, clock=_Clock())
    session = await sessions.open(SAMPLE)
    script = workload.group(0)[0]
    assert await session.start() == script.prompt_ids
    outcome = await session.act((1, 2, 3), high=False)
    expected = script.turns[0].observation_tokens
    assert len(outcome.observation_ids) == (0 if outcome.done else expected)
    assert [event.phase for event in recorder.events][:2] == [Phase.ENV_INIT, Phase.PRE_ACT]


def _context(sample_id: str, group_id: str, turns_done: int = 0) -> SampleContext:
    return SampleContext(sample_id, group_id, turns_done, 0, 0, 0)


async def test_the_oracles_truth_knows_a_sample_before_its_env_opens() -> None:
    workload = SyntheticWorkload(workload_config(3), seed=2)
    sessions = SimWorkloadSessions(workload, workload.token_model(), bus=EventBus(), clock=_Clock())
    with pytest.raises(KeyError, match="no open session"):
        sessions.truth(_context("g0-a0-s1", "g0"))  # no sibling open, no assignment asked
    early = sessions.truth(_context("g0-a0-s1", "g0"), assign=True)  # at admission
    script = workload.group(0)[1]
    assert early.turns == len(script.turns)
    assert early.gen_tokens == sum(turn.output_tokens for turn in script.turns)
    await sessions.open(SAMPLE)  # g0's first env opens: the group it was assigned
    assert sessions.group_index("g0") == 0
    later = sessions.truth(_context("g0-a0-s1", "g0", turns_done=1))  # a sibling opened
    assert later.turns == len(script.turns) - 1
    other = SampleRef("g1-a0-s0", Group("g1", prompt_index=1, size=3, admitted_step=0), index=0)
    sessions.truth(_context("g1-a0-s2", "g1"), assign=True)
    await sessions.open(other)
    assert sessions.group_index("g1") == 1  # admission order, as opening order would give


class _Clock:
    def now(self) -> float:
        return 0.0


def _example_env(handle: SandboxHandle) -> FileCheckEnv:
    return FileCheckEnv(handle, max_steps=5)


async def test_pool_sessions_lease_real_envs_and_release_them() -> None:
    config = PoolConfig(backend="local", warm_per_image=1, max_live=2, act_slots=1)
    backend = LocalBackend(exec_limits=ExecLimits(kill_grace_s=1, host_grace_s=3))
    async with EnvPool(backend, config) as pool:
        sessions = PoolSessions(
            pool, lambda _prompt: PooledEnv(_example_env, "img"), TOKENIZER, priorities=(1, 0)
        )
        session = await sessions.open(SAMPLE)
        prompt = await session.start()
        assert "answer.txt" in TOKENIZER.decode(prompt)
        outcome = await session.act([*TOKENIZER.encode("echo hi"), IM_END], high=True)
        assert "hi" in TOKENIZER.decode(outcome.observation_ids)
        await session.close()
        assert pool.stats().leased == 0
