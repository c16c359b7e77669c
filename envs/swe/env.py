"""`SWEEnv`: the SWE-bench-style agent environment (fix an issue in a repo, graded by its tests).

One episode = one task in one sandbox (from an env-pool `SandboxHandle` or a per-episode
lender, see `sandbox_source`). Each step parses the model's text into one tool call
(`actions.parse_action`), runs it (`tools.ToolBox`) and returns the rendered result. The episode
ends:

* terminated — on `submit`: the env takes the agent's patch itself and grades it in a fresh
  sandbox (`grader.Grader`); reward 1.0 iff resolved;
* truncated — at `episode.max_steps`, at `episode.max_episode_s` of wall clock (the injected
  clock, model time included), when the sandbox dies, or after `max_consecutive_timeouts` bash
  timeouts in a row; `info["truncation_reason"]` names which; reward 0 unless
  `grade_on_truncation`.

`info["infra_error"]` (a `{"code", "message"}` dict, else None) marks a step whose reward is void
because the infrastructure failed (grading sandbox or image missing, agent sandbox died): its
reward is reported as 0.0 but must not be trained on. Every step's info has the same base keys;
the last step of a graded episode adds `grading`, `resolved`, `patch` and `discarded_paths`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.swe.actions import ParseError, openai_tool_schemas, parse_action, swe_tool_specs
from envs.swe.config import SWEEnvConfig
from envs.swe.grader import AgentPatch, Grader, GradingSandboxFactory
from envs.swe.grading import EpisodeTask, GradingReport, InfraError, LogParser
from envs.swe.grading_log import parse_pytest_log
from envs.swe.observation import (
    ignored_actions_note,
    render_format_error,
    render_initial_prompt,
    render_notice,
    render_tool_result,
    timeout_note,
)
from envs.swe.sandbox_source import (
    AcquireSandbox,
    SandboxProvider,
    SandboxSource,
    sandbox_source,
)
from envs.swe.tools import ToolBox, ToolOutcome
from foundation.clock import Clock, LoopClock
from foundation.config import load_config
from harness.env import AgentEnv, ResetReturn, StepReturn
from harness.errors import HarnessError, SandboxError
from harness.handle import SandboxHandle
from harness.sandbox.base import Sandbox
from harness.standalone import BackendName

__all__ = ["EpisodeTask", "SWEEnv", "TruncationReason", "make_swe_env"]


class TruncationReason:
    """Values of `info["truncation_reason"]`."""

    MAX_STEPS = "max_steps"
    WALL_CLOCK = "wall_clock"
    SANDBOX_DEAD = "sandbox_dead"
    CONSECUTIVE_TIMEOUTS = "consecutive_timeouts"


@dataclass(slots=True)
class _Episode:
    task: EpisodeTask
    started_s: float
    tools: ToolBox | None = None
    consecutive_timeouts: int = 0


class SWEEnv(AgentEnv):
    """Fix the issue of a task's repository with bash, a file editor and `submit`.

    `tasks` is one task or a list; `reset(options={"task_id": ...})` picks one by instance id,
    otherwise a seeded random one. `sandboxes` is where the agent's sandbox comes from: a
    `SandboxHandle` (from `EnvPool`), an object with `async acquire(task) -> (sandbox, release)`,
    or such a function. `grading_sandboxes` makes a fresh sandbox from the task's image for
    grading; the env closes it afterwards.
    """

    def __init__(
        self,
        tasks: EpisodeTask | Sequence[EpisodeTask],
        *,
        sandboxes: SandboxHandle | SandboxProvider | AcquireSandbox,
        grading_sandboxes: GradingSandboxFactory,
        config: SWEEnvConfig | None = None,
        clock: Clock | None = None,
        parse_log: LogParser = parse_pytest_log,
    ) -> None:
        super().__init__()
        self._tasks = _index_tasks(tasks)
        self._source: SandboxSource = sandbox_source(sandboxes)
        self._config = config or SWEEnvConfig()
        self._clock = clock or LoopClock()
        self._grader = Grader(
            self._config.grading, grading_sandboxes, clock=self._clock, parse_log=parse_log
        )
        self._tool_specs = swe_tool_specs(self._config.tools.workdir)
        self._episode: _Episode | None = None

    @property
    def config(self) -> SWEEnvConfig:
        return self._config

    @property
    def task_ids(self) -> list[str]:
        return list(self._tasks)

    # -- AgentEnv hooks -------------------------------------------------------------------------

    async def _areset(self, seed: int | None, options: dict[str, Any] | None) -> ResetReturn:
        await self._source.end()
        self._episode = None
        task = self._choose_task(options or {})
        asked_s = self._clock.now()
        await self._source.begin(task)
        pool_wait_s = self._clock.now() - asked_s
        self._episode = _Episode(task=task, started_s=self._clock.now())
        episode = self._config.episode
        observation = render_initial_prompt(
            task.problem_statement,
            workdir=self._config.tools.workdir,
            tools=self._tool_specs,
            max_steps=episode.max_steps,
            tool_format=self._config.observation.tool_format,
        )
        info = {
            "task_id": task.instance_id,
            "tools": openai_tool_schemas(self._tool_specs),
            "limits": {
                "max_steps": episode.max_steps,
                "max_episode_s": episode.max_episode_s,
                "bash_timeout_s": self._config.tools.bash_timeout_s,
                "max_consecutive_timeouts": episode.max_consecutive_timeouts,
            },
            "pool_wait_s": pool_wait_s,
        }
        return observation, info

    async def _astep(self, action: str) -> StepReturn:
        episode = self._episode
        if episode is None:  # AgentEnv.astep only calls us inside an episode
            raise HarnessError("no episode is running; call reset() first")
        info = self._blank_info()
        if self._elapsed_s(episode) >= self._config.episode.max_episode_s:
            note = "The time limit of this episode was reached before this action; nothing ran."
            return await self._finish_truncated(
                episode, TruncationReason.WALL_CLOCK, render_notice(note), info
            )
        parsed = parse_action(action, self._tool_specs)
        notes = [ignored_actions_note(parsed.ignored_actions)] if parsed.ignored_actions else []
        info["ignored_actions"] = parsed.ignored_actions
        if isinstance(parsed, ParseError):
            info["parse_error"] = parsed.message
            observation = render_format_error(parsed.message, notes=notes)
            return await self._after_step(episode, observation, info, timed_out=False)
        info["tool"], info["format"] = parsed.name, parsed.format
        try:
            tools = await self._tools(episode)
            outcome = await tools.run(parsed)
        except SandboxError as exc:  # dead, or it never started
            return await self._sandbox_died(episode, str(exc), info)
        self._record_outcome(info, outcome)
        if outcome.timed_out:
            notes.append(timeout_note(self._config.tools.bash_timeout_s))
        rendered = render_tool_result(
            outcome.exit_code, outcome.output, max_output_chars=self._output_limit(outcome),
            notes=notes,
        )  # fmt: skip
        info["output_chars"], info["elided_chars"] = rendered.output_chars, rendered.elided_chars
        info["output_truncated"] = outcome.sandbox_truncated or rendered.truncated
        if outcome.submitted:
            reward, info = await self._grade(episode, info)
            await self._source.end()
            return rendered.text, reward, True, False, info
        check_alive = outcome.timed_out and self._config.episode.check_alive_after_timeout
        if check_alive and not await _alive(tools.sandbox):
            return await self._sandbox_died(episode, "the sandbox died after a timeout", info)
        return await self._after_step(episode, rendered.text, info, timed_out=outcome.timed_out)

    async def _aclose(self) -> None:
        self._episode = None
        await self._source.aclose()

    # -- episode end ----------------------------------------------------------------------------

    async def _after_step(
        self, episode: _Episode, observation: str, info: dict[str, Any], *, timed_out: bool
    ) -> StepReturn:
        """Count timeouts, then truncate if a limit is reached."""
        if info["tool"] is not None:
            episode.consecutive_timeouts = episode.consecutive_timeouts + 1 if timed_out else 0
        info["consecutive_timeouts"] = episode.consecutive_timeouts
        limits = self._config.episode
        reason: str | None = None
        if episode.consecutive_timeouts >= limits.max_consecutive_timeouts:
            reason = TruncationReason.CONSECUTIVE_TIMEOUTS
        elif self.steps >= limits.max_steps:
            reason = TruncationReason.MAX_STEPS
        elif self._elapsed_s(episode) >= limits.max_episode_s:
            reason = TruncationReason.WALL_CLOCK
        if reason is None:
            info["elapsed_s"] = self._elapsed_s(episode)
            return observation, 0.0, False, False, info
        return await self._finish_truncated(episode, reason, observation, info)

    async def _finish_truncated(
        self, episode: _Episode, reason: str, observation: str, info: dict[str, Any]
    ) -> StepReturn:
        info["truncation_reason"] = reason
        info["elapsed_s"] = self._elapsed_s(episode)
        observation += "\n" + render_notice(f"The episode is over: {reason.replace('_', ' ')}.")
        reward = 0.0
        if self._config.episode.grade_on_truncation:
            reward, info = await self._grade(episode, info)
        await self._source.end()
        return observation, reward, False, True, info

    async def _sandbox_died(
        self, episode: _Episode, message: str, info: dict[str, Any]
    ) -> StepReturn:
        info["truncation_reason"] = TruncationReason.SANDBOX_DEAD
        info["infra_error"] = InfraError("agent_sandbox_dead", message).to_dict()
        info["elapsed_s"] = self._elapsed_s(episode)
        await self._source.end()
        observation = render_notice("The sandbox stopped working; the episode is over.")
        return observation, 0.0, False, True, info

    async def _grade(self, episode: _Episode, info: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        task = episode.task
        patch: AgentPatch | InfraError
        try:
            patch = await self._grader.extract_patch(await self._source.get(), task)
        except SandboxError as exc:
            patch = InfraError("agent_sandbox_dead", f"could not read the patch: {exc}")
        if isinstance(patch, InfraError):
            report = GradingReport(
                instance_id=task.instance_id, resolved=False, infra_error=patch,
                f2p_failed=tuple(task.FAIL_TO_PASS), p2p_failed=tuple(task.PASS_TO_PASS),
            )  # fmt: skip
            info["patch"] = ""
        else:
            await self._source.end()  # free the agent's sandbox before the long test run
            report = await self._grader.grade(task, patch)
            info["patch"] = patch.text
            info["discarded_paths"] = list(patch.discarded_paths)
        info["grading"] = report.to_dict()
        info["resolved"] = report.resolved
        if report.infra_error is not None:
            info["infra_error"] = report.infra_error.to_dict()
        return report.reward, info

    # -- helpers --------------------------------------------------------------------------------

    async def _tools(self, episode: _Episode) -> ToolBox:
        """The episode's tools, made at its first action (the sandbox may start late)."""
        if episode.tools is None:
            sandbox: Sandbox = await self._source.get()
            episode.tools = ToolBox(sandbox, self._config.tools, clock=self._clock)
        return episode.tools

    def _output_limit(self, outcome: ToolOutcome) -> int:
        observation = self._config.observation
        if outcome.tool == "str_replace_editor":
            return observation.max_editor_output_chars
        return observation.max_output_chars

    def _choose_task(self, options: Mapping[str, Any]) -> EpisodeTask:
        task_id = options.get("task_id")
        if task_id is None:
            ids = list(self._tasks)
            return self._tasks[ids[int(self.np_random.integers(len(ids)))]]
        task = self._tasks.get(str(task_id))
        if task is None:
            close = difflib.get_close_matches(str(task_id), list(self._tasks), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise HarnessError(f"no task {task_id!r} in this env{hint}")
        return task

    def _elapsed_s(self, episode: _Episode) -> float:
        return self._clock.now() - episode.started_s

    def _blank_info(self) -> dict[str, Any]:
        return {
            "step": self.steps,
            "tool": None,
            "format": None,
            "parse_error": None,
            "ignored_actions": 0,
            "exit_code": None,
            "timed_out": False,
            "duration_s": 0.0,
            "output_bytes": 0,
            "output_chars": 0,
            "elided_chars": 0,
            "output_truncated": False,
            "consecutive_timeouts": 0,
            "elapsed_s": 0.0,
            "truncation_reason": None,
            "infra_error": None,
        }

    @staticmethod
    def _record_outcome(info: dict[str, Any], outcome: ToolOutcome) -> None:
        info["exit_code"] = outcome.exit_code
        info["timed_out"] = outcome.timed_out
        info["duration_s"] = outcome.duration_s
        info["output_bytes"] = outcome.output_bytes


def make_swe_env(
    *,
    tasks: EpisodeTask | Sequence[EpisodeTask] | None = None,
    sandboxes: SandboxHandle | SandboxProvider | AcquireSandbox | None = None,
    grading_sandboxes: GradingSandboxFactory | None = None,
    backend: BackendName = "auto",
    config: SWEEnvConfig | None = None,
    config_path: str | Path | None = None,
    overrides: Sequence[str] = (),
    clock: Clock | None = None,
) -> SWEEnv:
    """Entry point of `conductor/SWE-v0`: an `SWEEnv`, config from `config_path` + overrides.

    With no arguments it serves the shipped offline task set (choose one with
    `reset(options={"task_id": ...})`) from task images on `backend` (Docker when an engine
    answers; images are built on first use).
    """
    from envs.swe.runtime import swe_backend
    from envs.swe.tasks import load_shipped_tasks

    if config is None:
        config = load_config(SWEEnvConfig, config_path, overrides)
    if sandboxes is None or grading_sandboxes is None:
        runtime = swe_backend(backend)
        if sandboxes is None:
            sandboxes = runtime  # type: ignore[assignment]  # SWETask satisfies EpisodeTask
        if grading_sandboxes is None:
            grading_sandboxes = runtime.grading_sandbox
    assert sandboxes is not None and grading_sandboxes is not None
    return SWEEnv(
        load_shipped_tasks() if tasks is None else tasks,
        sandboxes=sandboxes,
        grading_sandboxes=grading_sandboxes,
        config=config,
        clock=clock,
    )


async def _alive(sandbox: Sandbox) -> bool:
    try:
        return await sandbox.is_alive()
    except SandboxError:
        return False


def _index_tasks(tasks: EpisodeTask | Sequence[EpisodeTask]) -> dict[str, EpisodeTask]:
    task_list = list(tasks) if isinstance(tasks, Sequence) else [tasks]
    if not task_list:
        raise HarnessError("SWEEnv needs at least one task")
    indexed: dict[str, EpisodeTask] = {}
    for task in task_list:
        if task.instance_id in indexed:
            raise HarnessError(
                f"task {task.instance_id!r} is given twice; instance ids must differ"
            )
        indexed[task.instance_id] = task
    return indexed
