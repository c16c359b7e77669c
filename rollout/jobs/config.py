"""Validated configuration of the two top-level jobs: `conductor simulate` and `conductor run`.

`SimulateConfig` (`configs/simulate/*.yaml`) and `RunConfig` (`configs/run/default.yaml`) gather
the sections of the layers below: the cores' `RolloutConfig` (`rollout.core.config`), the
shell's agent loop and conductor (`rollout.runtime.config`), and the simulated trainer and
scripted agent (`rollout.standins.config`). Shared files (model, engine, workload, …) are referenced
with a `ConfigRef`: a path, relative to the file that names it, plus `key=value` overrides.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from envs.swe.datasets import DatasetConfig
from envs.swe.tool_formats import ToolFormat
from foundation.config import ConfigRef, FrozenConfig
from harness.loop_watchdog import LoopWatchdogConfig
from rollout.agent_api.config import AgentApiConfig
from rollout.core.config import AsyncFactor
from rollout.core.sources import TaskSourceConfig
from rollout.engines.faults import EngineFaultConfig
from rollout.observe.trackers import TrackersConfig
from rollout.runtime.config import AgentLoopConfig, ConductorConfig
from rollout.simulation.config import ClusterConfig
from rollout.standins.config import ScriptedPolicyConfig, TrainerSimConfig

__all__ = [
    "RunConfig",
    "RunSourceConfig",
    "SimTaskSourceConfig",
    "SimulateConfig",
]


class SimTaskSourceConfig(TaskSourceConfig):
    """A task source of a simulated mixed run: a `TaskSourceConfig` and its own workload.

    Its `max_new_tokens` defaults to its workload's; its prompts are the workload's groups.
    """

    workload: ConfigRef = Field(description="The source's synthetic workload (configs/workload).")


class SimulateConfig(FrozenConfig):
    """`conductor simulate`: N training steps in virtual time for each policy, same workload."""

    seed: int = Field(default=0, description="Seed of the workload and every policy's run.")
    steps: int = Field(default=3, ge=1, description="Training steps per policy (steps).")
    policies: tuple[str | dict[str, Any], ...] = Field(
        default=("conductor", "sync", "traj_async"),
        min_length=1,
        description="Policies to compare: preset names (rollout.jobs.policies), derived "
        "ones ({name: x, base: conductor, <flag>: value}) or your own (package.module:name); "
        "the first is 'ours' in ratios.",
    )

    groups_per_step: int = Field(default=4, ge=1, description="B: groups per training step.")
    group_size: int = Field(default=4, ge=1, description="K: samples per group.")
    async_factor: AsyncFactor = Field(
        default=2,
        ge=0,
        description="Staleness bound of the staleness_bound policies; 0 and 1 = on-policy (steps).",
    )
    workload: ConfigRef = Field(
        description="Synthetic workload (configs/workload/*.yaml); with `sources`, it sets only "
        "the run's context limit (the sources bring their own workloads)."
    )
    sources: tuple[SimTaskSourceConfig, ...] = Field(
        default=(),
        description="Task sources of a mixed run (weights, classes, group sizes, sampling, "
        "workloads); empty: one source, `workload`.",
    )

    @field_validator("sources")
    @classmethod
    def _source_names_unique(
        cls, sources: tuple[SimTaskSourceConfig, ...]
    ) -> tuple[SimTaskSourceConfig, ...]:
        names = [source.name for source in sources]
        if len(set(names)) != len(names):
            raise ValueError(f"task source names repeat: {names}")
        return sources

    model: ConfigRef = Field(description="Served model and cost model (configs/model/*.yaml).")
    engine: ConfigRef = Field(description="Simulated engine (configs/engine/sim.yaml).")
    rollout: ConfigRef = Field(description="Rollout cores (configs/rollout/default.yaml).")
    agent_loop: AgentLoopConfig = Field(default_factory=AgentLoopConfig)
    conductor: ConductorConfig = Field(default_factory=ConductorConfig)
    trainer: TrainerSimConfig = Field(default_factory=TrainerSimConfig)
    cluster: ClusterConfig = Field(
        default_factory=ClusterConfig,
        description="Simulated engines and env nodes (default: one engine, no env limits). "
        "B (groups_per_step) is not scaled with it: set it for the cluster's size.",
    )
    write_trajectories: bool = Field(
        default=True,
        description="Write trajectories.jsonl (full token arrays: JSON costs about as much CPU as "
        "the simulation itself on large runs; metrics and the report do not need it).",
    )
    garbage_collection: Literal["end_of_run", "per_step", "automatic"] = Field(
        default="end_of_run",
        description="When Python's cycle collector runs during a simulated run. 'end_of_run': "
        "once, after it (acyclic garbage is freed at once anyway, and the simulator makes few "
        "cycles: peak memory of a 2,048-sample swe_like run is the same with no collection); "
        "'per_step': also after each training step (bounds cyclic garbage on long runs; each "
        "pass walks the live heap, about 0.7 s at that size); 'automatic': Python's default "
        "(its passes cost about 8% of such a run's CPU).",
    )
    stall_after_s: float = Field(
        default=3600.0,
        gt=0,
        description="Fail a run whose engine holds requests (waiting or admitted) and computes "
        "nothing for this many virtual seconds (a deadlock: without the check the time series "
        "keeps the clock running and the run never ends). Above the trainer's step time, which "
        "a paused engine waits out. Read off the time series: needs "
        "conductor.timeseries_interval_s > 0.",
    )
    out_dir: str = Field(
        default="runs/simulate",
        min_length=1,
        description="Parent of the per-policy run directories (relative to the working dir).",
    )

    @model_validator(mode="after")
    def _stall_outlasts_a_training_step(self) -> Self:
        if self.stall_after_s <= self.trainer.train_time_s:
            raise ValueError(
                f"stall_after_s ({self.stall_after_s}) must exceed trainer.train_time_s "
                f"({self.trainer.train_time_s}): an engine paused for a training step waits "
                "that long with requests queued"
            )
        return self


class RunSourceConfig(TaskSourceConfig):
    """A task source of `conductor run`: a `TaskSourceConfig` and the env it plays, with its own
    system prompt, chat template and tool format (rollout/jobs/env_sources.py loads it)."""

    env: str = Field(
        default="swe",
        min_length=1,
        description="The env the source plays (rollout/jobs/env_sources.py): swe (SWE tasks: "
        "`task_ids` of `tasks_file`, else the shipped set); example (the example env of "
        "envs/example: write a reversed word into a file, one prompt per word); or your own "
        "as package.module:MyEnv or path/to/file.py:make_env (an AgentEnv class, or a function "
        "of the leased SandboxHandle returning one).",
    )
    num_prompts: int = Field(
        default=0,
        ge=0,
        description="Your env / example: how many prompts it holds (each reset gets the "
        "options {'task': i}); 0 = the example's words, or 1 for your env. SWE sources hold "
        "their tasks (prompts).",
    )
    image: str = Field(
        default="",
        description="Your env: the Docker image its sandbox runs; empty = the offline base "
        "image (Python, git, bash).",
    )
    script: tuple[str, ...] = Field(
        default=(),
        description="Your env under the simulated engine: the turns the scripted agent plays "
        "for each sample (each is the model's whole reply; the last repeats if the episode "
        "goes on); empty = scripted.actions. A served model (sglang) needs none.",
    )
    task_ids: tuple[str, ...] = Field(
        default=(), description="swe: tasks to use, by instance id; empty = all of them."
    )
    tasks_file: str = Field(
        default="",
        description="swe: a task file (as RunConfig.tasks_file; relative paths from the config "
        "file); empty: the shipped offline task set.",
    )
    tasks_dataset: DatasetConfig = Field(
        default_factory=DatasetConfig, description="swe: the column layout of tasks_file."
    )
    system_prompt: str | None = Field(
        default=None,
        description="System message before each prompt; None = the run's. The tools and how "
        "to call them (`tool_format`) are appended to it.",
    )
    chat_template: Literal["run", "chatml", "model", "file"] = Field(
        default="run",
        description="run: the run's (the tokenizer's own template with tokenizer_path, else "
        "ChatML); chatml: ChatML over the run's tokenizer; model: the tokenizer's own template "
        "(needs tokenizer_path); file: the Jinja template in chat_template_file, rendered with "
        "the run's tokenizer (needs tokenizer_path).",
    )
    chat_template_file: str = Field(
        default="",
        description="Jinja chat template of chat_template: file (relative paths from the "
        "config file).",
    )
    describe_tools: bool = Field(
        default=True,
        description="Append the source's tools and how to call them (in `tool_format`) to its "
        "system message; off: the system prompt is used verbatim (describe the tools in it, or "
        "let the env's first observation do; a run without `sources` keeps its system_prompt "
        "verbatim, as before sources existed).",
    )
    observation_role: Literal["tool", "user"] = Field(
        default="tool", description="Role of the message that carries each tool result."
    )
    tool_format: ToolFormat = Field(
        default="tool_call",
        description="How tool calls are described in the system message, written by the "
        "scripted player and read back for the tool_wait hint (envs/swe/tool_formats.py): "
        "tool_call (Hermes JSON in <tool_call>), tool_call_xml (Qwen3-Coder XML in "
        "<tool_call>), json (the reply is one JSON object).",
    )

    @model_validator(mode="after")
    def _fields_fit_env(self) -> Self:
        if self.env != "swe" and (self.task_ids or self.tasks_file):
            raise ValueError(
                f"task source {self.name!r}: task_ids and tasks_file are for env: swe, not "
                f"env: {self.env} (its prompts are its words)"
            )
        if self.env == "swe" and (self.num_prompts or self.image or self.script):
            raise ValueError(
                f"task source {self.name!r}: num_prompts, image and script are for the example "
                "env and your own envs; a SWE source's prompts are its tasks"
            )
        if (self.chat_template == "file") != bool(self.chat_template_file):
            raise ValueError(
                f"task source {self.name!r}: chat_template: file and chat_template_file go "
                f"together (got chat_template: {self.chat_template}, chat_template_file: "
                f"{self.chat_template_file!r})"
            )
        return self


class RunConfig(FrozenConfig):
    """`conductor run`: SWE rollouts in real sandboxes, on the in-process simulated engine
    (scripted agents, wall-clock time) or on SGLang servers over HTTP."""

    seed: int = Field(default=0, description="Seed of the prompt order and the scripted agent.")
    steps: int = Field(default=3, ge=1, description="Training steps to run (steps).")
    policy: str = Field(default="conductor", description="Rollout policy (rollout.jobs.policies).")
    groups_per_step: int = Field(default=2, ge=1, description="B: groups per training step.")
    group_size: int = Field(default=4, ge=1, description="K: samples per group.")
    async_factor: AsyncFactor = Field(
        default=2, ge=0, description="Staleness bound; 0 and 1 = on-policy (steps)."
    )
    task_ids: tuple[str, ...] = Field(
        default=(), description="SWE tasks to use, by instance id; empty = all of them."
    )
    tasks_file: str = Field(
        default="",
        description="Your own SWE task file (JSONL / JSON / Parquet, relative paths from the "
        "config file; docs/swe.md); empty: the shipped offline task set.",
    )
    tasks_dataset: DatasetConfig = Field(
        default_factory=DatasetConfig,
        description="Column layout of tasks_file (format: conductor, swe-bench, swe-gym, "
        "swe-rebench, r2e-gym) and the conventions its rows leave out.",
    )
    system_prompt: str = Field(
        default="You are a software engineer fixing an issue in a repository.",
        description="System message before each task's prompt.",
    )
    tokenizer_path: str = Field(
        default="",
        description="Local directory of the served model's tokenizer and chat template "
        "(transformers format; relative paths from the working dir); empty: the byte "
        "tokenizer with ChatML that the simulated default and serve-sim use.",
    )
    engine_backend: str = Field(
        default="sim",
        min_length=1,
        description="The engines (rollout/engines/registry.py): sim, the in-process simulated "
        "engine with scripted agents (`model` and `engine`: configs/engine/sim.yaml); sglang, "
        "SGLang servers over HTTP whose model writes the turns (`engine`: "
        "configs/engine/sglang.yaml; for example `conductor serve-sim`, or a real model: "
        "docs/sglang.md); or your own as package.module:name.",
    )
    model: ConfigRef | None = Field(
        default=None,
        description="Served model and cost model (configs/model/*.yaml): read by the sim "
        "backend only.",
    )
    engine: ConfigRef = Field(
        description="The engine backend's own settings: configs/engine/sim.yaml for sim, "
        "configs/engine/sglang.yaml (the client's endpoints and timeouts) for sglang."
    )
    rollout: ConfigRef = Field(description="Rollout cores (configs/rollout/default.yaml).")
    pool: ConfigRef = Field(description="Env pool and sandbox backend (configs/pool/*.yaml).")
    ray: ConfigRef | None = Field(
        default=None,
        description="Env workers on a Ray cluster (configs/pool/ray.yaml, RayPoolConfig): one "
        "per node, each with its node's Docker engine and the `pool` limits (docs/scale-out.md); "
        "null: the pool runs in this process (one daemon, or `pool.hosts`).",
    )
    swe: ConfigRef = Field(description="SWE env (configs/swe/default.yaml).")
    agent_loop: AgentLoopConfig = Field(default_factory=AgentLoopConfig)
    conductor: ConductorConfig = Field(default_factory=ConductorConfig)
    trainer: TrainerSimConfig = Field(default_factory=TrainerSimConfig)
    scripted: ScriptedPolicyConfig = Field(default_factory=ScriptedPolicyConfig)
    engine_faults: EngineFaultConfig = Field(
        default_factory=EngineFaultConfig,
        description="Faults injected into the engine's generate calls, to test recovery "
        "(off by default).",
    )
    agent_api: AgentApiConfig = Field(
        default_factory=AgentApiConfig,
        description="A bring-your-own agent that plays each sample through an OpenAI-compatible "
        "endpoint (`agent_api.agent`); off by default (the native agent loop).",
    )
    watchdog: LoopWatchdogConfig = Field(
        default_factory=LoopWatchdogConfig,
        description="Event-loop stalls recorded in events.jsonl (phase loop_stall), and how "
        "long a signalled stop may take.",
    )
    out_dir: str = Field(
        default="runs", min_length=1, description="Parent of the run directory (working dir)."
    )
    trackers: TrackersConfig = Field(
        default_factory=TrackersConfig,
        description="Experiment trackers (TensorBoard, W&B offline, MLflow) for the per-step "
        "metrics and the report's figures; off by default (rollout.observe.trackers).",
    )
    sources: tuple[RunSourceConfig, ...] = Field(
        default=(),
        description="Task sources of a mixed run (envs, weights, classes, group sizes, "
        "sampling, system prompts, chat templates, tool formats; docs/mixed-rollout.md); "
        "empty: one SWE source from task_ids / tasks_file.",
    )

    @model_validator(mode="after")
    def _sources_valid(self) -> Self:
        if not self.sources:
            return self
        names = [source.name for source in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"task source names repeat: {names}")
        if self.task_ids or self.tasks_file:
            raise ValueError(
                "with `sources`, give task_ids / tasks_file to each swe source, not to the run"
            )
        if self.agent_api.agent:
            raise ValueError("a bring-your-own agent (agent_api.agent) plays one source only")
        needs_model = [s.name for s in self.sources if s.chat_template in ("model", "file")]
        if needs_model and not self.tokenizer_path:
            raise ValueError(
                f"task sources {needs_model} render with the model's tokenizer "
                "(chat_template: model or file): set tokenizer_path"
            )
        return self
