"""The task sources of a mixed `conductor run`: each source's tasks, prompt, template and envs.

`RunConfig.sources` names each source's env (`swe`: a SWE task set; `example`: the example env
of envs/example, one prompt per word), its system prompt, chat template and tool format
(`RunSourceConfig`). This module turns them into what the run's job wires in:

* `load_run_sources`: each source's tasks (a source's unknown task ids are a `ConfigError`
  naming the source), its system message (its prompt plus its tools in its tool format), its
  `ChatFormat` factory and template, all checked once up front;
* `source_images`: the images the prompts the run can reach need, per source;
* `sourced_sessions`: one `PoolSessions` per source behind `SourcedSessions`, each with its
  own env factory, system message, template and tool-call reader; with the scripted agent,
  each session is registered with its source's script (SWE strategies, or a tiny player of the
  example env), written in the source's tool format.

Every source renders with the run's tokenizer: the engine serves one model, so the token ids
of every source must be that model's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from envs.example.env import WORDS, FileCheckEnv, example_tool_specs, task_word
from envs.swe import SWEEnvConfig, SWETask
from envs.swe.actions import ToolSpec, swe_tool_specs
from envs.swe.datasets import DatasetConfig
from envs.swe.factory import SandboxSpec, SWEEnvFactory
from envs.swe.runtime import BackendSandboxes
from envs.swe.tool_formats import called_tool, tool_instructions
from foundation.errors import ConfigError
from harness.backends import DockerBackend
from harness.fleet import LeasePool
from harness.images import ensure_base_image
from rollout.core.sources import SourceLayout, SourcePrompts
from rollout.errors import RolloutError
from rollout.jobs.config import RunConfig, RunSourceConfig
from rollout.runtime.env_session import SampleRef, SessionFactory, SourcedSessions
from rollout.runtime.pool_sessions import PooledEnv, PoolSessions
from rollout.standins.config import ScriptedPolicyConfig
from rollout.standins.scripted_agent import (
    AgentScript,
    ScriptedSWEAgent,
    agent_script,
    file_check_script,
)
from rollout.trajectories.chat_format import ChatFormat, ChatMLFormat
from rollout.trajectories.hf_tokenizer import HFChatFormat, HFTokenizer
from rollout.trajectories.tokenizer import ChatTemplate, Tokenizer

__all__ = ["RunSource", "load_run_sources", "source_images", "sourced_sessions"]

SelectTasks = Callable[[Sequence[str], Path | None, DatasetConfig], list[SWETask]]
"""`rollout.jobs.swe_run.select_tasks`: task ids, task file, its column layout → tasks."""


@dataclass(frozen=True, slots=True)
class RunSource:
    """One source of a mixed run, loaded: its tasks, tools, system message and chat rendering."""

    config: RunSourceConfig
    tasks: tuple[SWETask, ...]  # env: swe; empty for the example env (its prompts are WORDS)
    tools: tuple[ToolSpec, ...]
    system_prompt: str
    template: ChatTemplate
    chat_format: Callable[[], ChatFormat] | None  # None: ChatML with `template`
    workdir: str  # where the SWE tools work (named in the scripted calls)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def num_prompts(self) -> int:
        return len(self.tasks) if self.config.env == "swe" else len(WORDS)

    def prompts(self) -> SourcePrompts:
        return SourcePrompts(self.config, self.num_prompts)

    def tool_of(self, text: str) -> str | None:
        """The tool a model text calls, read in this source's tool format."""
        return called_tool(self.config.tool_format, text, self.tools)

    def swe_config(self, run_config: SWEEnvConfig) -> SWEEnvConfig:
        """The run's SWE env config with this source's tool format in its first observation."""
        observation = run_config.observation.model_copy(
            update={"tool_format": self.config.tool_format}
        )
        return run_config.model_copy(update={"observation": observation})

    def script(
        self,
        local_index: int,
        sample_id: str,
        agent: ScriptedSWEAgent,
        scripted: ScriptedPolicyConfig,
    ) -> AgentScript:
        """The scripted player's turns for prompt `local_index`, in this source's tool format."""
        rng = agent.sample_rng(sample_id)
        tool_format = self.config.tool_format
        if self.config.env == "swe":
            task = self.tasks[local_index]
            return agent_script(task, rng, scripted, self.workdir, tool_format)
        return file_check_script(task_word(local_index), rng, scripted, tool_format)


def load_run_sources(
    config: RunConfig,
    base_dir: Path,
    *,
    tokenizer: Tokenizer,
    hf_tokenizer: HFTokenizer | None,
    swe_config: SWEEnvConfig,
    select_tasks: SelectTasks,
) -> tuple[RunSource, ...]:
    """Load and check every source of `config` (paths from `base_dir`); raises `ConfigError`."""
    run_format = HFChatFormat.factory(hf_tokenizer) if hf_tokenizer is not None else None
    loaded = []
    for source in config.sources:
        where = f"task source {source.name!r}"
        if source.env == "swe":
            tasks_file = base_dir / source.tasks_file if source.tasks_file else None
            try:
                tasks = tuple(select_tasks(source.task_ids, tasks_file, source.tasks_dataset))
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from exc
            tools = swe_tool_specs(swe_config.tools.workdir)
        else:
            tasks, tools = (), example_tool_specs()
        if source.env == "swe" and not tasks:
            raise ConfigError(f"{where} has no tasks")
        template = ChatTemplate(observation_role=source.observation_role)
        chat_format = _chat_format(source, base_dir, tokenizer, hf_tokenizer, run_format, template)
        prompt = config.system_prompt if source.system_prompt is None else source.system_prompt
        instructions = tool_instructions(source.tool_format, tools)
        system_prompt = f"{prompt}\n\n{instructions}" if prompt else instructions
        workdir = swe_config.tools.workdir
        loaded.append(
            RunSource(source, tasks, tools, system_prompt, template, chat_format, workdir)
        )
    return tuple(loaded)


def _chat_format(
    source: RunSourceConfig,
    base_dir: Path,
    tokenizer: Tokenizer,
    hf_tokenizer: HFTokenizer | None,
    run_format: Callable[[], ChatFormat] | None,
    template: ChatTemplate,
) -> Callable[[], ChatFormat] | None:
    """The source's `ChatFormat` factory (None: ChatML), checked by making one."""
    where = f"task source {source.name!r}"
    chosen: Callable[[], ChatFormat] | None
    try:
        if source.chat_template == "run":
            chosen = run_format
        elif source.chat_template == "chatml":
            chosen = None
            ChatMLFormat(tokenizer, template)  # the tokenizer must know ChatML's special tokens
        else:
            assert hf_tokenizer is not None  # RunConfig checks it
            text = None
            if source.chat_template == "file":
                path = Path(source.chat_template_file)
                path = path if path.is_absolute() else base_dir / path
                text = path.read_text()
            chosen = HFChatFormat.factory(hf_tokenizer, text)
    except (OSError, RolloutError) as exc:
        raise ConfigError(f"{where}: chat_template {source.chat_template}: {exc}") from exc
    return chosen


async def source_images(
    sources: Sequence[RunSource],
    layout: SourceLayout,
    reachable: set[int],
    runtime: BackendSandboxes,
) -> dict[str, dict[int, str]]:
    """Each source's image per local prompt index, for the global prompts in `reachable`."""
    images: dict[str, dict[int, str]] = {source.name: {} for source in sources}
    by_name = {source.name: source for source in sources}
    for index in sorted(reachable):
        name, local = layout.locate(index)
        source = by_name[name]
        if source.config.env == "swe":
            images[name][local] = await runtime.ensure_image(source.tasks[local])
        else:
            images[name][local] = await _example_image(runtime)
    return images


async def _example_image(runtime: BackendSandboxes) -> str:
    """The example env's image: the base image on Docker, an empty directory locally."""
    backend = runtime.backend
    if isinstance(backend, DockerBackend):
        return await asyncio.to_thread(ensure_base_image, backend.client)
    return ""


def sourced_sessions(
    sources: Sequence[RunSource],
    layout: SourceLayout,
    pool: LeasePool,
    *,
    images: Mapping[str, Mapping[int, str]],
    tokenizer: Tokenizer,
    swe_config: SWEEnvConfig,
    sandbox_spec: SandboxSpec,
    agent: ScriptedSWEAgent | None,
    scripted: ScriptedPolicyConfig,
    priorities: tuple[int, int],
    tool_result_chars: int,
) -> SessionFactory:
    """Each source's `PoolSessions` behind `SourcedSessions` (see the module docstring)."""
    factories: dict[str, SessionFactory] = {}
    for source in sources:
        source_images = images[source.name]
        source_swe = source.swe_config(swe_config)  # once per source, not per sample

        def env_for(
            index: int,
            source: RunSource = source,
            known: Mapping[int, str] = source_images,
            env_config: SWEEnvConfig = source_swe,
        ) -> PooledEnv:
            image = known.get(index)
            if image is None:
                raise RolloutError(f"no image was prepared for prompt {index} of {source.name!r}")
            if source.config.env == "swe":
                task = source.tasks[index]
                factory = SWEEnvFactory(task, env_config, sandbox_spec, image)
                return PooledEnv(factory, image, {"task_id": task.instance_id})
            return PooledEnv(partial(FileCheckEnv, tool_calls=True), image, {"task": index})

        def on_open(session_id: str, sample: SampleRef, source: RunSource = source) -> None:
            if agent is not None:  # a remote model reads its task from the prompt
                script = source.script(sample.group.prompt_index, sample.sample_id, agent, scripted)
                agent.register_script(session_id, script, sample.sample_id)

        factories[source.name] = PoolSessions(
            pool,
            env_for,
            tokenizer,
            system_prompt=source.system_prompt,
            template=source.template,
            priorities=priorities,
            tool_of=source.tool_of,
            tool_result_chars=tool_result_chars,
            on_open=on_open,
            chat_format=source.chat_format,
        )
    return SourcedSessions(layout, factories)
