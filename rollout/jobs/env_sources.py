"""Env sources by kind: what a `conductor run` source's `env` can say, and how each is loaded.

A run draws its groups from task sources (`RunConfig.sources`; a run without them is a run of
one source built from its `task_ids` / `tasks_file`). Each source names an env kind:

* `swe`: SWE tasks (`task_ids` of `tasks_file`, else the shipped set), the bash / editor /
  submit tools, graded by their tests;
* `example`: the example env of envs/example (write a reversed word into a file), one prompt per
  word;
* your own env, by dotted path (`package.module:MyEnv` or `path/to/file.py:make_env`): an
  `AgentEnv` class or a function that takes the leased `SandboxHandle` and returns an
  `AgentEnv` (the README's "Plug in a new env"). Its `num_prompts` prompts are the reset
  options `{"task": i}`; its sandbox runs `image` (default: the offline base image); under the
  simulated engine the scripted agent plays the source's `script` turns.

`EnvSourceKind.load` checks a source once, before anything starts (unknown task ids, broken task
rows, a missing env class are `ConfigError`s naming the source) and returns a `LoadedSource`:
its prompts, tools, system message and chat rendering, and how to make its envs, images and
scripted turns. `default_env_sources()` registers `swe` and `example`; register your own kind
on a registry you pass to the plan. There is no global registry.
"""

from __future__ import annotations

import asyncio
import difflib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from envs.example.env import WORDS, FileCheckEnv, example_tool_specs, task_word
from envs.swe import SWEEnvConfig, SWETask, load_shipped_tasks
from envs.swe.actions import ToolSpec, swe_tool_specs
from envs.swe.datasets import DatasetConfig, load_dataset_tasks
from envs.swe.factory import SandboxSpec, SWEEnvFactory
from envs.swe.runtime import BackendSandboxes
from envs.swe.tasks import TaskSetError
from envs.swe.tool_formats import called_tool, tool_instructions
from foundation.errors import ConfigError
from foundation.loading import is_object_spec, load_object
from harness.backends import DockerBackend
from harness.env import AgentEnv
from harness.images import ensure_base_image
from rollout.core.sources import SourcePrompts
from rollout.errors import RolloutError
from rollout.jobs.config import RunSourceConfig
from rollout.runtime.pool_sessions import PooledEnv
from rollout.standins.config import ScriptedPolicyConfig
from rollout.standins.scripted_agent import AgentScript, agent_script, file_check_script
from rollout.trajectories.chat_format import ChatFormat, ChatMLFormat
from rollout.trajectories.hf_tokenizer import HFChatFormat, HFTokenizer
from rollout.trajectories.tokenizer import ChatTemplate, Tokenizer

__all__ = [
    "EnvSourceKind",
    "EnvSourceRegistry",
    "LoadedSource",
    "SourceContext",
    "default_env_sources",
    "select_tasks",
]


@dataclass(frozen=True, slots=True)
class SourceContext:
    """What loading a source needs from its run."""

    base_dir: Path  # where the run config's relative paths resolve
    system_prompt: str  # the run's (a source may set its own)
    swe: SWEEnvConfig  # the run's SWE env settings
    tokenizer: Tokenizer  # the run's tokenizer (the engine serves one model)
    hf_tokenizer: HFTokenizer | None  # the model's own tokenizer and template, if given


@dataclass(frozen=True, slots=True)
class LoadedSource:
    """One source, checked: its prompts, tools, system message, chat rendering, envs."""

    config: RunSourceConfig
    num_prompts: int
    tools: tuple[ToolSpec, ...]
    system_prompt: str
    template: ChatTemplate
    chat_format: Callable[[], ChatFormat] | None  # None: ChatML with `template`
    make_env: Callable[[int, str, SandboxSpec], PooledEnv]  # local index, image, sandbox spec
    prepare_image: Callable[[int, BackendSandboxes], Awaitable[str]]  # local index -> image
    scripted_turns: Callable[[int, random.Random, ScriptedPolicyConfig], AgentScript | None]
    task_ids: tuple[str, ...] = ()  # env: swe, for messages and labels

    @property
    def name(self) -> str:
        return self.config.name

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


class EnvSourceKind(Protocol):
    """One kind of env a source can play (see the module docstring)."""

    def load(self, config: RunSourceConfig, context: SourceContext) -> LoadedSource:
        """Check `config` and load its prompts; raises `ConfigError` naming the source."""
        ...


class EnvSourceRegistry:
    """Env source kinds by name; refuses empty and duplicate names."""

    def __init__(self) -> None:
        self._kinds: dict[str, EnvSourceKind] = {}

    def register(self, name: str, kind: EnvSourceKind) -> None:
        if not name or not name.strip():
            raise ValueError("an env source kind needs a non-empty name")
        if name in self._kinds:
            raise ValueError(f"env source kind {name!r} is already registered; pick another")
        self._kinds[name] = kind

    def names(self) -> tuple[str, ...]:
        return tuple(self._kinds)

    def load(self, config: RunSourceConfig, context: SourceContext) -> LoadedSource:
        """Load `config` with the kind its `env` names (a registered name or a dotted path)."""
        if is_object_spec(config.env):
            return UserEnvKind().load(config, context)
        kind = self._kinds.get(config.env)
        if kind is None:
            close = difflib.get_close_matches(config.env, list(self._kinds), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"task source {config.name!r}: no env kind {config.env!r}{hint} Known: "
                f"{', '.join(self._kinds)}; or name your own env as package.module:MyEnv"
            )
        return kind.load(config, context)


def default_env_sources() -> EnvSourceRegistry:
    """A fresh registry with the shipped kinds: `swe` and `example`."""
    registry = EnvSourceRegistry()
    registry.register("swe", SWEKind())
    registry.register("example", ExampleKind())
    return registry


def select_tasks(
    task_ids: Sequence[str],
    tasks_file: Path | None = None,
    dataset: DatasetConfig | None = None,
) -> list[SWETask]:
    """The tasks named by `task_ids` (all of them when empty), in the given order, from
    `tasks_file` (read as `dataset` says) or the shipped set. Bad records are a ConfigError."""
    if tasks_file is None:
        tasks = list(load_shipped_tasks())
        listing = (
            "`python -c 'from envs.swe import load_shipped_tasks as l; print([t.instance_id for "
            "t in l()])'`"
        )
    else:
        try:
            loaded = load_dataset_tasks(tasks_file, dataset or DatasetConfig())
        except TaskSetError as exc:
            raise ConfigError(str(exc)) from exc
        if loaded.errors:
            listing = "\n  ".join(str(error) for error in loaded.errors)
            raise ConfigError(
                f"{len(loaded.errors)} bad task record(s) in {tasks_file}; fix or remove them:"
                f"\n  {listing}"
            )
        tasks = list(loaded.tasks)
        listing = f"the instance_id fields of {tasks_file}"
    if not task_ids:
        return tasks
    by_id = {task.instance_id: task for task in tasks}
    missing = [task_id for task_id in task_ids if task_id not in by_id]
    if missing:
        raise ConfigError(f"unknown SWE task ids {missing}; see {listing}")
    return [by_id[task_id] for task_id in task_ids]


def _system_prompt(
    config: RunSourceConfig, context: SourceContext, tools: Sequence[ToolSpec]
) -> str:
    """The source's system message: its prompt (or the run's), then its tools in its format."""
    prompt = context.system_prompt if config.system_prompt is None else config.system_prompt
    if not tools or not config.describe_tools:
        return prompt
    instructions = tool_instructions(config.tool_format, tools)
    return f"{prompt}\n\n{instructions}" if prompt else instructions


def _rendering(
    config: RunSourceConfig, context: SourceContext
) -> tuple[ChatTemplate, Callable[[], ChatFormat] | None]:
    """The source's chat template and `ChatFormat` factory (None: ChatML), checked by making
    one."""
    template = ChatTemplate(observation_role=config.observation_role)
    where = f"task source {config.name!r}"
    hf = context.hf_tokenizer
    chosen: Callable[[], ChatFormat] | None
    try:
        if config.chat_template == "run":
            chosen = HFChatFormat.factory(hf) if hf is not None else None
        elif config.chat_template == "chatml":
            chosen = None
            ChatMLFormat(context.tokenizer, template)  # the tokenizer must know ChatML's tokens
        else:
            if hf is None:
                raise ConfigError(
                    f"{where} renders with the model's tokenizer (chat_template: "
                    f"{config.chat_template}): set tokenizer_path"
                )
            text = None
            if config.chat_template == "file":
                path = Path(config.chat_template_file)
                path = path if path.is_absolute() else context.base_dir / path
                text = path.read_text()
            chosen = HFChatFormat.factory(hf, text)
    except (OSError, RolloutError) as exc:
        raise ConfigError(f"{where}: chat_template {config.chat_template}: {exc}") from exc
    return template, chosen


async def _base_image(runtime: BackendSandboxes) -> str:
    """The offline base image on Docker, an empty directory's name locally."""
    backend = runtime.backend
    if isinstance(backend, DockerBackend):
        return await asyncio.to_thread(ensure_base_image, backend.client)
    return ""


class SWEKind:
    """SWE tasks: bash, editor and submit tools; rewards from the task's tests."""

    def load(self, config: RunSourceConfig, context: SourceContext) -> LoadedSource:
        where = f"task source {config.name!r}"
        tasks_file = context.base_dir / config.tasks_file if config.tasks_file else None
        try:
            tasks = tuple(select_tasks(config.task_ids, tasks_file, config.tasks_dataset))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        if not tasks:
            raise ConfigError(f"{where} has no tasks")
        workdir = context.swe.tools.workdir
        tools = swe_tool_specs(workdir)
        template, chat_format = _rendering(config, context)
        observation = context.swe.observation.model_copy(update={"tool_format": config.tool_format})
        env_config = context.swe.model_copy(update={"observation": observation})

        def make_env(index: int, image: str, spec: SandboxSpec) -> PooledEnv:
            task = tasks[index]
            factory = SWEEnvFactory(task, env_config, spec, image)
            return PooledEnv(factory, image, {"task_id": task.instance_id})

        async def prepare_image(index: int, runtime: BackendSandboxes) -> str:
            return await runtime.ensure_image(tasks[index])

        def turns(
            index: int, rng: random.Random, scripted: ScriptedPolicyConfig
        ) -> AgentScript | None:
            return agent_script(tasks[index], rng, scripted, workdir, config.tool_format)

        return LoadedSource(
            config=config,
            num_prompts=len(tasks),
            tools=tools,
            system_prompt=_system_prompt(config, context, tools),
            template=template,
            chat_format=chat_format,
            make_env=make_env,
            prepare_image=prepare_image,
            scripted_turns=turns,
            task_ids=tuple(task.instance_id for task in tasks),
        )


class ExampleKind:
    """The example env: write a word reversed into a file (one prompt per word)."""

    def load(self, config: RunSourceConfig, context: SourceContext) -> LoadedSource:
        tools = example_tool_specs()
        template, chat_format = _rendering(config, context)

        def make_env(index: int, image: str, spec: SandboxSpec) -> PooledEnv:
            return PooledEnv(partial(FileCheckEnv, tool_calls=True), image, {"task": index})

        async def prepare_image(index: int, runtime: BackendSandboxes) -> str:
            return await _base_image(runtime)

        def turns(
            index: int, rng: random.Random, scripted: ScriptedPolicyConfig
        ) -> AgentScript | None:
            return file_check_script(task_word(index), rng, scripted, config.tool_format)

        return LoadedSource(
            config=config,
            num_prompts=config.num_prompts or len(WORDS),
            tools=tools,
            system_prompt=_system_prompt(config, context, tools),
            template=template,
            chat_format=chat_format,
            make_env=make_env,
            prepare_image=prepare_image,
            scripted_turns=turns,
        )


class UserEnvKind:
    """An env of your own named by dotted path (see the module docstring)."""

    def load(self, config: RunSourceConfig, context: SourceContext) -> LoadedSource:
        where = f"task source {config.name!r}"
        factory = load_object(config.env, context.base_dir, what=f"{where}: env")
        if not callable(factory):
            raise ConfigError(
                f"{where}: env {config.env!r} is a {type(factory).__name__}, not an AgentEnv "
                "class or a function taking a SandboxHandle"
            )
        if isinstance(factory, type) and not issubclass(factory, AgentEnv):
            raise ConfigError(f"{where}: env {config.env!r} is a class but not an AgentEnv")
        template, chat_format = _rendering(config, context)
        image = config.image

        def make_env(index: int, ready_image: str, spec: SandboxSpec) -> PooledEnv:
            return PooledEnv(factory, ready_image, {"task": index})

        async def prepare_image(index: int, runtime: BackendSandboxes) -> str:
            return image or await _base_image(runtime)

        def turns(
            index: int, rng: random.Random, scripted: ScriptedPolicyConfig
        ) -> AgentScript | None:
            actions = config.script or scripted.actions
            return AgentScript("fixed", tuple(actions)) if actions else None

        return LoadedSource(
            config=config,
            num_prompts=config.num_prompts or 1,
            tools=(),
            system_prompt=_system_prompt(config, context, ()),
            template=template,
            chat_format=chat_format,
            make_env=make_env,
            prepare_image=prepare_image,
            scripted_turns=turns,
        )
