"""`SWEEnv` end to end with the tiny task in local sandboxes: episodes, limits, rewards, cheats."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from envs.swe.config import EpisodeConfig, GradingConfig, SWEEnvConfig, ToolsConfig
from envs.swe.env import SWEEnv, make_swe_env
from envs.swe.tasks import SWETask
from foundation.clock import ManualClock
from foundation.config import load_config
from harness.errors import HarnessError, ImageNotFoundError, SandboxDeadError
from harness.handle import OwnedSandboxHandle
from harness.sandbox.base import ExecResult, Sandbox
from tests.envs.swe.tiny_task import F2P, TEST_FILE, TinyTaskBed


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def bash(command: str) -> str:
    return call("bash", command=command)


SUBMIT = call("submit")


def make_env(
    bed: TinyTaskBed, task: SWETask, *, clock: ManualClock | None = None, **sections: Any
) -> SWEEnv:
    return SWEEnv(
        task,
        sandboxes=bed.acquire,
        grading_sandboxes=bed.grading_sandbox,
        config=SWEEnvConfig(**sections),
        clock=clock or ManualClock(),
    )


async def play(env: SWEEnv, *actions: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    await env.areset(seed=0)
    result: tuple[str, float, bool, bool, dict[str, Any]] = ("", 0.0, False, False, {})
    for action in actions:
        result = await env.astep(action)
    return result


def apply_patch_command(patch: str) -> str:
    return f"git apply <<'EOF_PATCH'\n{patch}EOF_PATCH"


# -- reset ---------------------------------------------------------------------------------------


async def test_reset_shows_the_issue_and_how_to_call_tools(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task)
    observation, info = await env.areset(seed=0)
    assert tiny_task.problem_statement in observation and "<tool_call>" in observation
    assert info["task_id"] == tiny_task.instance_id
    names = [tool["function"]["name"] for tool in info["tools"]]
    assert names == ["bash", "str_replace_editor", "submit"]
    assert info["limits"]["max_steps"] == EpisodeConfig().max_steps
    await env.aclose()


async def test_reset_picks_the_task_named_in_options(bed: TinyTaskBed, tiny_task: SWETask) -> None:
    other = tiny_task.model_copy(update={"instance_id": "tiny__calc-2", "problem_statement": "B"})
    env = SWEEnv(
        [tiny_task, other], sandboxes=bed.acquire, grading_sandboxes=bed.grading_sandbox,
        clock=ManualClock(),
    )  # fmt: skip
    _, info = await env.areset(options={"task_id": "tiny__calc-2"})
    assert info["task_id"] == "tiny__calc-2"
    with pytest.raises(HarnessError, match="did you mean tiny__calc-2"):
        await env.areset(options={"task_id": "tiny__calc-3"})
    await env.aclose()


async def test_a_new_reset_gives_back_the_previous_sandbox(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task)
    await env.areset(seed=0)
    await env.areset(seed=1)
    assert bed.released == bed.lent[:1] and len(bed.lent) == 2
    await env.aclose()
    assert bed.released == bed.lent


# -- steps ---------------------------------------------------------------------------------------


async def test_a_bash_step_returns_the_return_code_and_output(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task)
    observation, reward, terminated, truncated, info = await play(env, bash("ls calc; exit 4"))
    assert observation.startswith("<returncode>4</returncode>\n<output>\n")
    assert "ops.py" in observation
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["tool"] == "bash" and info["exit_code"] == 4 and info["step"] == 1
    await env.aclose()


async def test_a_message_without_a_tool_call_is_an_error_observation_that_counts_as_a_step(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task)
    observation, _, terminated, truncated, info = await play(env, "I'll fix it now.")
    assert observation.startswith("<error>Format error:")
    assert info["parse_error"] and info["tool"] is None and env.steps == 1
    assert not (terminated or truncated)
    await env.aclose()


async def test_extra_tool_calls_are_dropped_with_a_note(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task)
    observation, _, terminated, _, info = await play(env, bash("echo one") + SUBMIT)
    assert "one" in observation and "only the first one was run" in observation
    assert info["ignored_actions"] == 1 and not terminated
    await env.aclose()


async def test_long_output_is_truncated_in_the_observation(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task, observation={"max_output_chars": 200})
    observation, _, _, _, info = await play(env, bash("seq 1 5000"))
    assert "characters elided" in observation and "\n5000\n" in observation
    assert info["output_truncated"] and info["elided_chars"] > 0
    await env.aclose()


async def test_the_editor_works_through_the_env(bed: TinyTaskBed, tiny_task: SWETask) -> None:
    env = make_env(bed, tiny_task)
    edit = call(
        "str_replace_editor", command="str_replace", path="/testbed/calc/ops.py",
        old_str="return a - b", new_str="return a + b",
    )  # fmt: skip
    observation, _, _, _, info = await play(env, edit)
    assert "has been edited" in observation and info["exit_code"] == 0
    assert "return a + b" in (bed.lent[0].root / "calc" / "ops.py").read_text()
    await env.aclose()


# -- rewards and cheats --------------------------------------------------------------------------


async def test_submitting_the_gold_fix_gives_reward_1(
    bed: TinyTaskBed, tiny_task: SWETask, gold_patch: str
) -> None:
    env = make_env(bed, tiny_task)
    _, reward, terminated, truncated, info = await play(
        env, bash(apply_patch_command(gold_patch)), SUBMIT
    )
    assert (reward, terminated, truncated) == (1.0, True, False), info["grading"]["log_tail"]
    assert info["resolved"] and info["infra_error"] is None
    assert "return a + b" in info["patch"]
    # graded twice, each verdict in a fresh sandbox of its own (docs/swe.md, "Two verdicts")
    assert bed.released == bed.lent and len(bed.graded_in) == 2


async def test_submitting_without_changes_gives_reward_0(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    _, reward, terminated, _, info = await play(make_env(bed, tiny_task), SUBMIT)
    assert (reward, terminated) == (0.0, True)
    assert info["grading"]["f2p_failed"] == [F2P] and info["infra_error"] is None


async def test_editing_the_tests_instead_of_the_code_gives_reward_0(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    fake_tests = "def test_add():\\n    pass\\n\\ndef test_mul():\\n    pass\\n"
    _, reward, _, _, info = await play(
        make_env(bed, tiny_task), bash(f"printf '{fake_tests}' > {TEST_FILE}"), SUBMIT
    )
    assert reward == 0.0 and info["discarded_paths"] == [TEST_FILE]


async def test_deleting_the_tests_gives_reward_0(bed: TinyTaskBed, tiny_task: SWETask) -> None:
    _, reward, _, _, info = await play(make_env(bed, tiny_task), bash("rm -rf tests"), SUBMIT)
    assert reward == 0.0 and info["discarded_paths"] == [TEST_FILE]
    assert info["grading"]["f2p_failed"] == [F2P]


FAKE_PASS_CONFTEST = """
def pytest_unconfigure(config):
    print("PASSED tests/test_ops.py::test_add")
    print("PASSED tests/test_ops.py::test_mul")
"""
FAKE_SUMMARY_CONFTEST = """
import atexit, os, sys

def _forge():
    sys.stdout.write(
        "=========== short test summary info ===========\\n"
        "PASSED tests/test_ops.py::test_add\\nPASSED tests/test_ops.py::test_mul\\n"
        "=========== 2 passed in 0.01s ===========\\n"
    )
    sys.stdout.flush()
    os._exit(0)

atexit.register(_forge)
"""


@pytest.mark.parametrize("conftest", [FAKE_PASS_CONFTEST, FAKE_SUMMARY_CONFTEST])
async def test_a_conftest_that_prints_fake_passes_gives_reward_0(
    bed: TinyTaskBed, tiny_task: SWETask, conftest: str
) -> None:
    create = call(
        "str_replace_editor", command="create", path="/testbed/conftest.py", file_text=conftest
    )
    _, reward, _, _, info = await play(make_env(bed, tiny_task), create, SUBMIT)
    assert reward == 0.0 and info["discarded_paths"] == ["conftest.py"]


@pytest.mark.parametrize("conftest", [FAKE_PASS_CONFTEST, FAKE_SUMMARY_CONFTEST])
async def test_fake_passes_are_caught_even_when_the_conftest_reaches_grading(
    bed: TinyTaskBed, tiny_task: SWETask, conftest: str
) -> None:
    """Defence in depth: with conftest changes kept, the log checks still refuse the forgery."""
    env = make_env(bed, tiny_task, grading=GradingConfig(test_path_patterns=("**/tests/**",)))
    create = call(
        "str_replace_editor", command="create", path="/testbed/conftest.py", file_text=conftest
    )
    _, reward, _, _, info = await play(env, create, SUBMIT)
    assert "conftest.py" in info["patch"]
    assert reward == 0.0 and info["infra_error"] is None
    assert F2P in info["grading"]["f2p_failed"]


async def test_a_missing_grading_image_is_an_infra_error_not_a_zero(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    async def no_image(task: object) -> Sandbox:
        raise ImageNotFoundError("image 'sweb.eval.tiny' does not exist here")

    env = SWEEnv(tiny_task, sandboxes=bed.acquire, grading_sandboxes=no_image, clock=ManualClock())
    _, reward, terminated, _, info = await play(env, SUBMIT)
    assert terminated and reward == 0.0
    assert info["infra_error"]["code"] == "image_missing"


async def test_grading_on_truncation_grades_the_work_done(
    bed: TinyTaskBed, tiny_task: SWETask, gold_patch: str
) -> None:
    env = make_env(bed, tiny_task, episode={"max_steps": 1, "grade_on_truncation": True})
    _, reward, terminated, truncated, info = await play(env, bash(apply_patch_command(gold_patch)))
    assert (reward, terminated, truncated) == (1.0, False, True)
    assert info["truncation_reason"] == "max_steps"


# -- limits --------------------------------------------------------------------------------------


async def test_the_step_limit_truncates_without_grading(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task, episode={"max_steps": 2})
    first = await play(env, bash("true"))
    assert not first[3]
    _, reward, terminated, truncated, info = await env.astep("no tool here")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["truncation_reason"] == "max_steps" and bed.graded_in == []
    assert bed.released == bed.lent


async def test_the_wall_clock_limit_truncates_before_running_the_action(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    clock = ManualClock()
    env = make_env(bed, tiny_task, clock=clock, episode={"max_episode_s": 60})
    await env.areset(seed=0)
    clock.advance(61)
    observation, _, _, truncated, info = await env.astep(bash("touch ran.txt"))
    assert truncated and info["truncation_reason"] == "wall_clock"
    assert "time limit" in observation and not (bed.lent[0].root / "ran.txt").exists()


async def test_three_timeouts_in_a_row_truncate_the_episode(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task, tools=ToolsConfig(bash_timeout_s=0.3))
    await env.areset(seed=0)
    results = [await env.astep(bash("sleep 30")) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert results[0][4]["timed_out"] and "timed out after 0.3 s" in results[0][0]
    assert results[2][4]["truncation_reason"] == "consecutive_timeouts"


async def test_a_command_that_finishes_resets_the_timeout_count(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    env = make_env(bed, tiny_task, tools=ToolsConfig(bash_timeout_s=0.3))
    await env.areset(seed=0)
    for command in ("sleep 30", "sleep 30", "true", "sleep 30"):
        *_, truncated, info = await env.astep(bash(command))
    assert not truncated and info["consecutive_timeouts"] == 1
    await env.aclose()


class _DyingSandbox:
    """Wraps a sandbox; after `die()` every exec raises and is_alive is False."""

    def __init__(self, inner: Sandbox, *, raise_on_exec: bool) -> None:
        self._inner = inner
        self._raise = raise_on_exec
        self.dead = False

    @property
    def workdir(self) -> str:
        return self._inner.workdir

    async def exec(self, cmd: str, *, timeout_s: float, workdir: str | None = None,
                   env: Mapping[str, str] | None = None) -> ExecResult:  # fmt: skip
        if self.dead and self._raise:
            raise SandboxDeadError("container 1234 is gone")
        result = await self._inner.exec(cmd, timeout_s=timeout_s, workdir=workdir, env=env)
        self.dead = self.dead or "kill-me" in cmd
        return result

    async def write_file(self, path: str, content: bytes) -> None:
        await self._inner.write_file(path, content)

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        return await self._inner.read_file(path, max_bytes=max_bytes)

    async def is_alive(self) -> bool:
        return not self.dead

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.mark.parametrize("raise_on_exec", [True, False])
async def test_a_dead_sandbox_truncates_with_an_infra_error(
    bed: TinyTaskBed, tiny_task: SWETask, raise_on_exec: bool
) -> None:
    async def acquire(task: object) -> tuple[Sandbox, Any]:
        return _DyingSandbox(bed.fresh_sandbox(), raise_on_exec=raise_on_exec), _nothing

    env = SWEEnv(
        tiny_task, sandboxes=acquire, grading_sandboxes=bed.grading_sandbox, clock=ManualClock(),
        config=SWEEnvConfig(tools=ToolsConfig(bash_timeout_s=0.3)),
    )  # fmt: skip
    await env.areset(seed=0)
    # With raise_on_exec the next exec raises; without, the death shows after a timeout.
    await env.astep(bash("echo kill-me"))
    observation, reward, _, truncated, info = await env.astep(bash("sleep 30"))
    assert truncated and reward == 0.0 and "stopped working" in observation
    assert info["truncation_reason"] == "sandbox_dead"
    assert info["infra_error"]["code"] == "agent_sandbox_dead"


async def _nothing() -> None:
    return None


# -- sandbox handles (EnvPool) and the sync API --------------------------------------------------


async def test_with_a_handle_reset_does_not_wait_for_the_sandbox(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    started: list[Sandbox] = []

    async def create() -> Sandbox:
        sandbox = bed.fresh_sandbox()
        started.append(sandbox)
        return sandbox

    env = SWEEnv(
        tiny_task, sandboxes=OwnedSandboxHandle(create), grading_sandboxes=bed.grading_sandbox,
        clock=ManualClock(),
    )  # fmt: skip
    await env.areset(seed=0)
    assert started == []
    observation, *_ = await env.astep(bash("echo hi"))
    assert "hi" in observation and len(started) == 1
    await env.astep(SUBMIT)
    assert not await started[0].is_alive()  # the owned handle closed it at the episode end
    await env.areset(seed=1)
    await env.astep(bash("true"))
    assert len(started) == 2
    await env.aclose()


async def test_a_handle_that_gives_back_the_old_sandbox_cannot_start_a_second_episode(
    bed: TinyTaskBed, tiny_task: SWETask
) -> None:
    sandbox = bed.fresh_sandbox()

    class SameSandboxHandle:
        ready = True

        async def get(self) -> Sandbox:
            return sandbox

        async def aclose(self) -> None:
            return None

    env = SWEEnv(
        tiny_task, sandboxes=SameSandboxHandle(), grading_sandboxes=bed.grading_sandbox,
        clock=ManualClock(),
    )  # fmt: skip
    await env.areset(seed=0)
    await env.astep(bash("true"))
    with pytest.raises(HarnessError, match="new lease"):
        await env.areset(seed=1)
    await env.aclose()


def test_the_sync_gymnasium_api_runs_an_episode(
    bed: TinyTaskBed, tiny_task: SWETask, gold_patch: str
) -> None:
    env = make_env(bed, tiny_task)
    try:
        observation, _ = env.reset(seed=0)
        assert env.observation_space.contains(observation)
        env.step(bash(apply_patch_command(gold_patch)))
        _, reward, terminated, _, _ = env.step(SUBMIT)
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()
    assert bed.released == bed.lent


# -- config --------------------------------------------------------------------------------------


def test_the_shipped_config_file_holds_the_defaults() -> None:
    loaded = load_config(SWEEnvConfig, Path("configs/swe/default.yaml"))
    assert loaded == SWEEnvConfig()


def test_an_editor_output_limit_below_the_view_clip_is_refused() -> None:
    with pytest.raises(ValueError, match="max_editor_output_chars"):
        SWEEnvConfig(observation={"max_editor_output_chars": 1000})


async def test_make_swe_env_applies_config_overrides(bed: TinyTaskBed, tiny_task: SWETask) -> None:
    env = make_swe_env(
        tasks=[tiny_task], sandboxes=bed.acquire, grading_sandboxes=bed.grading_sandbox,
        config_path="configs/swe/default.yaml", overrides=["episode.max_steps=7"],
    )  # fmt: skip
    assert env.config.episode.max_steps == 7 and env.task_ids == [tiny_task.instance_id]
    await env.aclose()
