"""The plan of `conductor run`: every setting resolved and checked once, before anything starts.

`plan_run(path, overrides)` reads a `RunConfig` and the files it references in the order of
`rollout.jobs.plan`, applies B, K, `async_factor` and the seed, resolves the policy and the
engine backend (which applies the policy's engine asks or warns about those it cannot honour),
loads every task source through its env kind (task files, rows and ids checked; a run without
`sources` is a run of one source made from its `task_ids` / `tasks_file`), loads the model's
tokenizer and a bring-your-own agent, and checks that no lower file sets what the plan owns.
Nothing is written and no container or engine is started; a plan that fails leaves no run
directory behind. `RunPlan.effective_config()` is the run's `effective_config.yaml`.

Paths: a path written in a config file is relative to that file; a path given on the command
line (`tasks_file=...`, `tokenizer_path=...`) is relative to the working directory.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.swe import SWEEnvConfig
from foundation.config import ConfigRef, FrozenConfig, read_yaml_mapping
from foundation.errors import ConfigError
from foundation.provenance import (
    Origins,
    Section,
    Traced,
    display_path,
    effective_config_text,
    leaf_paths,
    load_traced,
)
from harness.fleet.ray_config import RayPoolConfig
from harness.pool import PoolConfig
from rollout.agent_api.context import AgentFn
from rollout.agent_api.loading import load_agent
from rollout.core.config import RolloutConfig
from rollout.core.sources import SourceLayout
from rollout.engines.registry import EngineBackend, EngineBackendRegistry, default_engine_backends
from rollout.engines.sim import ServedModelConfig
from rollout.jobs.config import RunConfig, RunSourceConfig
from rollout.jobs.env_sources import (
    EnvSourceRegistry,
    LoadedSource,
    SourceContext,
    default_env_sources,
)
from rollout.jobs.plan import (
    COMMAND_LINE,
    POLICY_OWNED_ROLLOUT,
    RUN_SHAPE,
    check_owned,
    labelled_ref_overrides,
    mark_owned,
    policy_origin,
    policy_section,
    shape_run,
)
from rollout.jobs.policies import PolicyRegistry, default_policy_registry
from rollout.runtime.policy import RolloutPolicy
from rollout.standins.config import ScriptedPolicyConfig
from rollout.trajectories.hf_tokenizer import HFTokenizer
from rollout.trajectories.tokenizer import ByteTokenizer, Tokenizer

__all__ = ["IMPLICIT_SOURCE", "Registries", "RunPlan", "plan_run", "plan_run_config"]

IMPLICIT_SOURCE = "tasks"
"""The name of the one source of a run that gives `task_ids` / `tasks_file` instead of
`sources` (its trajectories carry no source: the run is not mixed)."""


@dataclass(frozen=True, slots=True)
class Registries:
    """The seams a plan resolves names through (fresh defaults unless you pass your own)."""

    policies: PolicyRegistry = field(default_factory=default_policy_registry)
    engines: EngineBackendRegistry = field(default_factory=default_engine_backends)
    env_sources: EnvSourceRegistry = field(default_factory=default_env_sources)


@dataclass(frozen=True, slots=True)
class RunPlan:
    """A `RunConfig` resolved once (module docstring); read it, never change it."""

    config: RunConfig
    base_dir: Path
    policy: RolloutPolicy
    rollout: RolloutConfig  # the run's shape and the policy applied
    backend: EngineBackend
    engine: FrozenConfig  # the backend's settings, as the policy's asks left them
    model: ServedModelConfig | None  # the sim backend's served model
    pool: PoolConfig
    swe: SWEEnvConfig
    ray: RayPoolConfig | None
    tokenizer: Tokenizer
    hf_tokenizer: HFTokenizer | None
    sources: tuple[LoadedSource, ...]
    mixed: bool  # the config named its sources (else one implicit source: not mixed)
    agent: AgentFn | None  # a bring-your-own agent
    notes: tuple[str, ...] = ()  # warnings: what the engine cannot honour, and the like
    sections: Mapping[str, tuple[Origins, str]] = field(default_factory=dict)

    @property
    def layout(self) -> SourceLayout:
        return SourceLayout.of([source.prompts() for source in self.sources])

    def describe(self) -> dict[str, Any]:
        """What config.yaml records (the run's config, its policy, engine and base dir)."""
        described: dict[str, Any] = {
            "run": self.config.model_dump(mode="json"),
            "policy": self.policy.config.model_dump(mode="json"),
            "engine": {"backend": self.backend.name, **self.engine.model_dump(mode="json")},
            "base_dir": str(self.base_dir),  # where `run`'s config paths resolve (resume)
        }
        if self.model is not None:
            described["model"] = self.model.model_dump(mode="json")
        return described

    def effective_config(self) -> str:
        """`effective_config.yaml`: every setting of the run with its origin."""
        origin = policy_origin(self.config.policy)
        rollout_origins, rollout_header = self._section("rollout")
        rollout_origins = Origins(dict(rollout_origins.by_path))
        mark_owned(rollout_origins, POLICY_OWNED_ROLLOUT, origin)
        if self.policy.config.admission == "synchronous":
            rollout_origins.set_by(("admission", "async_factor"), f"{origin} (synchronous)")
        engine_origins, engine_header = self._section("engine")
        sections = [
            Section("run", self.config.model_dump(mode="json"), *self._section("run")),
            policy_section(self.policy, origin),
            Section("rollout", self.rollout.model_dump(mode="json"), rollout_origins,
                    rollout_header),
            Section("engine", self.engine.model_dump(mode="json"), engine_origins,
                    f"backend {self.backend.name}, {engine_header}"),
            Section("pool", self.pool.model_dump(mode="json"), *self._section("pool")),
            Section("swe", self.swe.model_dump(mode="json"), *self._section("swe")),
            Section("sources", {s.name: s.config.model_dump(mode="json") for s in self.sources},
                    Origins({(s.name,): self._section("run")[1] or "the run's config"
                             for s in self.sources}),
                    "the run's sources" if self.mixed else "one source, from the run's task_ids "
                    "and tasks_file"),
        ]  # fmt: skip
        if self.model is not None:
            sections.insert(4, Section("model", self.model.model_dump(mode="json"),
                                       *self._section("model")))  # fmt: skip
        if self.ray is not None:
            sections.append(Section("ray", self.ray.model_dump(mode="json"), *self._section("ray")))
        notes = [f"note: {note}" for note in self.notes]
        preamble = (
            "The settings this run used, resolved once by its plan (rollout/jobs/plan.py). Each",
            "value's comment says where it came from: a file, an override (in a file or on the",
            "command line), the run's shape (B, K, async_factor, seed), a policy, or a default.",
            *notes,
            "",
        )
        return effective_config_text(sections, preamble)

    def _section(self, name: str) -> tuple[Origins, str]:
        return self.sections.get(name, (Origins(), ""))


def plan_run(
    path: Path, overrides: Sequence[str] = (), *, registries: Registries | None = None
) -> RunPlan:
    """The plan of the run config at `path` with command-line `overrides`."""
    top = load_traced(RunConfig, path, [(text, COMMAND_LINE) for text in overrides])
    top = Traced(_command_line_paths(top), top.origins)
    raw = read_yaml_mapping(path)
    return _resolve(top, raw, path.resolve().parent, path, registries or Registries())


def plan_run_config(
    config: RunConfig, base_dir: Path, *, registries: Registries | None = None
) -> RunPlan:
    """The plan of an already loaded `config` (a resumed run's; paths relative to `base_dir`)."""
    given = Origins({leaf: "the run's config" for leaf in leaf_paths(config.model_dump())})
    return _resolve(Traced(config, given), {}, base_dir, None, registries or Registries())


def _command_line_paths(top: Traced[RunConfig]) -> RunConfig:
    """`top.config` with relative paths given on the command line made absolute from the
    working directory (paths written in files stay relative to their file)."""
    changes: dict[str, Any] = {}
    for name in ("tasks_file",):
        value = getattr(top.config, name)
        if value and top.origins.of((name,)) == COMMAND_LINE and not Path(value).is_absolute():
            changes[name] = str(Path.cwd() / value)
    return top.config.model_copy(update=changes) if changes else top.config


def _resolve(
    top: Traced[RunConfig],
    raw: Mapping[str, Any],
    base_dir: Path,
    path: Path | None,
    registries: Registries,
) -> RunPlan:
    config = top.config
    sections: dict[str, tuple[Origins, str]] = {
        "run": (top.origins, display_path(path) if path else "")
    }

    def load(name: str, ref: ConfigRef, model: type[Any]) -> Any:
        labelled = labelled_ref_overrides(ref, raw.get(name), name, path)
        traced = load_traced(model, ref.resolve(base_dir), labelled)
        sections[name] = (traced.origins, display_path(ref.resolve(base_dir)))
        return traced.config

    policy = registries.policies.resolve(config.policy, base_dir)
    rollout = _shaped_rollout(config, load("rollout", config.rollout, RolloutConfig), sections)
    backend = registries.engines.get(config.engine_backend, base_dir)
    engine, notes = _engine(config, backend, policy, load, sections)
    model = None
    if backend.needs_model:
        if config.model is None:
            raise ConfigError(
                f"engine_backend {backend.name} reads the served model: set model: "
                "{path: ../model/qwen3_8b_h200.yaml} (configs/model/)"
            )
        model = load("model", config.model, ServedModelConfig)
    pool = load("pool", config.pool, PoolConfig)
    swe = load("swe", config.swe, SWEEnvConfig)
    ray = load("ray", config.ray, RayPoolConfig) if config.ray is not None else None
    hf_tokenizer = HFTokenizer(config.tokenizer_path) if config.tokenizer_path else None
    tokenizer: Tokenizer = hf_tokenizer if hf_tokenizer is not None else ByteTokenizer()
    context = SourceContext(base_dir, config.system_prompt, swe, tokenizer, hf_tokenizer)
    sources = tuple(
        registries.env_sources.load(source, context) for source in _source_configs(config)
    )
    if backend.needs_token_model:
        _check_scripts(sources, config.scripted)
    agent = load_agent(config.agent_api.agent, base_dir) if config.agent_api.agent else None
    return RunPlan(
        config=config,
        base_dir=base_dir,
        policy=policy,
        rollout=policy.shape_rollout(rollout),
        backend=backend,
        engine=engine,
        model=model,
        pool=pool,
        swe=swe,
        ray=ray,
        tokenizer=tokenizer,
        hf_tokenizer=hf_tokenizer,
        sources=sources,
        mixed=bool(config.sources),
        agent=agent,
        notes=notes,
        sections=sections,
    )


def _shaped_rollout(
    config: RunConfig, rollout: RolloutConfig, sections: dict[str, tuple[Origins, str]]
) -> RolloutConfig:
    """Step 3: the run's shape into the cores (after checking the file leaves it alone)."""
    origins, where = sections["rollout"]
    check_owned("rollout", where, origins, (*RUN_SHAPE, *POLICY_OWNED_ROLLOUT))
    mark_owned(origins, RUN_SHAPE, f"the run's shape ({sections['run'][1] or 'its config'})")
    return shape_run(
        rollout,
        groups_per_step=config.groups_per_step,
        group_size=config.group_size,
        async_factor=config.async_factor,
        seed=config.seed,
    )


def _engine(
    config: RunConfig,
    backend: EngineBackend,
    policy: RolloutPolicy,
    load: Any,
    sections: dict[str, tuple[Origins, str]],
) -> tuple[FrozenConfig, tuple[str, ...]]:
    """Step 4 for the engine: its file read as the backend's config, the policy's asks applied
    (a file that sets what the asks set is an error; what the backend cannot do, a note)."""
    try:
        engine = load("engine", config.engine, backend.config_model)
    except ConfigError as exc:
        raise ConfigError(
            f"{exc}. engine_backend {backend.name} reads `engine` as "
            f"{backend.config_model.__name__}: point engine.path at its file (configs/engine/"
            f"{backend.name}.yaml), or use configs/run/{backend.name}.yaml"
        ) from exc
    origins, where = sections["engine"]
    configured, notes = backend.configure(engine, policy.engine_asks())
    asked = {
        key
        for key, value in configured.model_dump().items()
        if engine.model_dump().get(key) != value
    }
    clashing = sorted(key for key in asked if origins.explicit((key,)))
    if clashing:
        raise ConfigError(
            f"engine {', '.join(clashing)} set in {where} but the policy {policy.name} sets "
            f"{'them' if len(clashing) > 1 else 'it'} (its engine_priority_scheduling and "
            "kv_policy flags): remove them from the engine file and derive a policy instead"
        )
    for key in asked:
        origins.set_by((key,), f"policy {policy.name} (engine asks)")
    return configured, notes


def _source_configs(config: RunConfig) -> tuple[RunSourceConfig, ...]:
    """The run's sources; a run without `sources` is a run of one SWE source."""
    if config.sources:
        return config.sources
    return (
        RunSourceConfig(
            name=IMPLICIT_SOURCE,
            env="swe",
            task_ids=config.task_ids,
            tasks_file=config.tasks_file,
            tasks_dataset=config.tasks_dataset,
            describe_tools=False,  # the run's system_prompt verbatim, as before sources existed
        ),
    )


def _check_scripts(sources: Sequence[LoadedSource], scripted: ScriptedPolicyConfig) -> None:
    """Under a simulated engine the scripted agent plays every sample: each source needs
    turns for it (your own env: `script`, or `scripted.actions`)."""
    for source in sources:
        if source.scripted_turns(0, random.Random(0), scripted) is None:
            raise ConfigError(
                f"task source {source.name!r} plays {source.config.env} under a simulated "
                "engine, whose scripted agent needs its turns: set script: ['your first reply', "
                "...] on the source (or scripted.actions), or serve a model (engine_backend: "
                "sglang)"
            )
