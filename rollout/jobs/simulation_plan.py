"""The plan of `conductor simulate` and `conductor bench rollout`: every setting resolved once.

`plan_simulation(path, overrides)` reads a `SimulateConfig` and the files it references in the
order of `rollout.jobs.plan`, applies B, K, `async_factor` and the seed (and gives K and B to the
workload, the workload's and model's turn limits to the agent loop), resolves the policies, and
checks that no lower file sets what the plan owns. `Simulation.for_policy` then applies one
policy (its scheduler flags to the cores, its engine asks to the simulated engine), and
`Simulation.effective_config` writes what that policy's run used, with origins.
`load_simulation(config, base_dir)` plans an already loaded config (its top-level settings are
labelled "given").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from rollout.core.config import RolloutConfig
from rollout.core.sources import SourcePrompts, TaskSourceConfig
from rollout.engines.registry import SimBackend
from rollout.engines.sim import ServedModelConfig, SimEngineConfig
from rollout.jobs.config import SimTaskSourceConfig, SimulateConfig
from rollout.jobs.plan import (
    COMMAND_LINE,
    POLICY_OWNED_ENGINE,
    POLICY_OWNED_ROLLOUT,
    RUN_SHAPE,
    Owned,
    check_owned,
    labelled_ref_overrides,
    mark_owned,
    policy_origin,
    policy_section,
    shape_run,
)
from rollout.jobs.policies import PolicyRegistry, default_policy_registry
from rollout.runtime.config import AgentLoopConfig
from rollout.runtime.policy import RolloutPolicy
from rollout.simulation.workload import WorkloadConfig

__all__ = ["PolicyPlan", "SimSource", "Simulation", "load_simulation", "plan_simulation"]

_WORKLOAD_SHAPE = (
    Owned(("group_size",), "K, the run's group_size", "group_size=N"),
    Owned(("groups_per_step",), "B, the run's groups_per_step", "groups_per_step=N"),
)
_AGENT_LOOP_SHAPE = (
    Owned(("max_new_tokens",), "the workload's max_new_tokens", "the workload file"),
    Owned(
        ("max_context_tokens",),
        "the workload's and the model's max_context_tokens (the smaller)",
        "the workload or model file",
    ),
    Owned(("recompute_page_tokens",), "the engine's page_tokens", "the engine file"),
)


@dataclass(frozen=True, slots=True)
class SimSource:
    """A task source of a mixed simulated run, with its workload loaded (group size applied)."""

    config: TaskSourceConfig
    workload: WorkloadConfig


@dataclass(frozen=True, slots=True)
class PolicyPlan:
    """What one policy's run uses: the cores and the engine as the policy shaped them."""

    policy: RolloutPolicy
    rollout: RolloutConfig
    engine: SimEngineConfig


@dataclass(frozen=True, slots=True)
class Simulation:
    """A `SimulateConfig` resolved once (module docstring); read it, never change it."""

    config: SimulateConfig
    workload: WorkloadConfig
    model: ServedModelConfig
    engine: SimEngineConfig  # as the files say; `for_policy` applies a policy's asks
    rollout: RolloutConfig  # B, K, async_factor and seed applied; `for_policy` the policy
    agent_loop: AgentLoopConfig
    sources: tuple[SimSource, ...] = ()
    policies: tuple[RolloutPolicy, ...] = ()
    base_dir: Path = field(default_factory=Path.cwd)
    sections: Mapping[str, tuple[Origins, str]] = field(default_factory=dict)
    policy_origins: Mapping[str, str] = field(default_factory=dict)

    def source_prompts(self) -> tuple[SourcePrompts, ...]:
        """The conductor's task sources: each source and its workload's group count."""
        return tuple(SourcePrompts(s.config, s.workload.num_groups) for s in self.sources)

    @property
    def num_prompts(self) -> int:
        if self.sources:
            return sum(source.workload.num_groups for source in self.sources)
        return self.workload.num_groups

    def for_policy(self, policy: RolloutPolicy) -> PolicyPlan:
        """The cores and the simulated engine as `policy` shapes them (step 4 of the order)."""
        engine, _ = SimBackend().configure(self.engine, policy.engine_asks())
        assert isinstance(engine, SimEngineConfig)
        return PolicyPlan(policy, policy.shape_rollout(self.rollout), engine)

    def describe(self) -> dict[str, Any]:
        """Everything that defines the run (written to each run's config.yaml)."""
        return {
            "simulate": self.config.model_dump(mode="json"),
            "workload": self.workload.model_dump(mode="json"),
            "model": self.model.model_dump(mode="json"),
            "engine": self.engine.model_dump(mode="json"),
            "rollout": self.rollout.model_dump(mode="json"),
            "agent_loop": self.agent_loop.model_dump(mode="json"),
            **({"sources": [_describe(source) for source in self.sources]} if self.sources else {}),
        }

    def effective_config(self, plan: PolicyPlan) -> str:
        """`effective_config.yaml` of `plan`'s run: every setting with its origin."""
        origin = self.policy_origins.get(plan.policy.name, f"policy {plan.policy.name}")
        rollout_origins, rollout_header = self._section("rollout")
        engine_origins, engine_header = self._section("engine")
        rollout_origins = Origins(dict(rollout_origins.by_path))
        engine_origins = Origins(dict(engine_origins.by_path))
        mark_owned(rollout_origins, POLICY_OWNED_ROLLOUT, origin)
        mark_owned(engine_origins, POLICY_OWNED_ENGINE, origin)
        if plan.policy.config.admission == "synchronous":
            rollout_origins.set_by(("admission", "async_factor"), f"{origin} (synchronous)")
        sections = [
            Section("simulate", _top_values(self.config), *self._section("simulate")),
            policy_section(plan.policy, origin),
            Section("rollout", plan.rollout.model_dump(mode="json"), rollout_origins,
                    rollout_header),
            Section("engine", plan.engine.model_dump(mode="json"), engine_origins, engine_header),
            Section("model", self.model.model_dump(mode="json"), *self._section("model")),
            Section("workload", self.workload.model_dump(mode="json"), *self._section("workload")),
            Section("agent_loop", self.agent_loop.model_dump(mode="json"),
                    *self._section("agent_loop")),
        ]  # fmt: skip
        preamble = (*_PREAMBLE, f"Policy {plan.policy.name}; SIMULATED (virtual time).")
        return effective_config_text(sections, preamble)

    def _section(self, name: str) -> tuple[Origins, str]:
        return self.sections.get(name, (Origins(), ""))


_PREAMBLE = (
    "The settings this run used, resolved once by its plan (rollout/jobs/plan.py). Each value's",
    "comment says where it came from: a file, an override (in a file or on the command line),",
    "the run's shape (B, K, async_factor, seed), a policy, or the field's default.",
    "",
)


def _describe(source: SimSource) -> dict[str, Any]:
    return {
        **source.config.model_dump(mode="json"),
        "workload": source.workload.model_dump(mode="json"),
    }


def _top_values(config: FrozenConfig) -> dict[str, Any]:
    """The command's own settings (its file references as path + overrides); the agent loop
    is its own section, with the values the plan derived."""
    return config.model_dump(mode="json", exclude={"agent_loop"})


def plan_simulation(
    path: Path, overrides: Sequence[str] = (), *, registry: PolicyRegistry | None = None
) -> Simulation:
    """The plan of the simulate config at `path` with command-line `overrides`."""
    top = load_traced(SimulateConfig, path, [(text, COMMAND_LINE) for text in overrides])
    raw = read_yaml_mapping(path)
    return _resolve(top, raw, path.resolve().parent, path, registry)


def load_simulation(
    config: SimulateConfig, base_dir: Path, *, registry: PolicyRegistry | None = None
) -> Simulation:
    """The plan of an already loaded `config` (paths relative to `base_dir`)."""
    given = Origins({leaf: "given" for leaf in leaf_paths(_set_fields(config))})
    return _resolve(Traced(config, given), {}, base_dir, None, registry)


def _set_fields(config: FrozenConfig) -> dict[str, Any]:
    """The fields set explicitly on `config`, nested (pydantic's fields_set, recursively)."""
    values: dict[str, Any] = {}
    for name in config.model_fields_set:
        value = getattr(config, name)
        values[name] = _set_fields(value) if isinstance(value, FrozenConfig) else value
    return values


def _resolve(
    top: Traced[SimulateConfig],
    raw: Mapping[str, Any],
    base_dir: Path,
    path: Path | None,
    registry: PolicyRegistry | None,
) -> Simulation:
    config = top.config
    sections: dict[str, tuple[Origins, str]] = {"simulate": (top.origins, _where(path))}

    def load(name: str, model: type[Any]) -> Any:
        ref: ConfigRef = getattr(config, name)
        labelled = labelled_ref_overrides(ref, raw.get(name), name, path)
        traced = load_traced(model, ref.resolve(base_dir), labelled)
        sections[name] = (traced.origins, display_path(ref.resolve(base_dir)))
        return traced

    workload = load("workload", WorkloadConfig)
    model = load("model", ServedModelConfig)
    engine = load("engine", SimEngineConfig)
    rollout = load("rollout", RolloutConfig)
    check_owned("workload", sections["workload"][1], workload.origins, _WORKLOAD_SHAPE)
    check_owned("rollout", sections["rollout"][1], rollout.origins,
                (*RUN_SHAPE, *POLICY_OWNED_ROLLOUT))  # fmt: skip
    check_owned("engine", sections["engine"][1], engine.origins, POLICY_OWNED_ENGINE)
    check_owned("agent_loop", sections["simulate"][1] or "the config", _sub(top.origins,
                "agent_loop"), _AGENT_LOOP_SHAPE)  # fmt: skip
    shape = f"the run's shape ({_where(path) or 'the config'})"
    mark_owned(workload.origins, _WORKLOAD_SHAPE, shape)
    mark_owned(rollout.origins, RUN_SHAPE, shape)
    loop_origins = _sub(top.origins, "agent_loop")
    mark_owned(loop_origins, _AGENT_LOOP_SHAPE, "the workload, model and engine files")
    sections["agent_loop"] = (loop_origins, _where(path))
    shaped_workload = workload.config.model_copy(
        update={"group_size": config.group_size, "groups_per_step": config.groups_per_step}
    )
    shaped_rollout = shape_run(
        rollout.config,
        groups_per_step=config.groups_per_step,
        group_size=config.group_size,
        async_factor=config.async_factor,
        seed=config.seed,
    )
    agent_loop = config.agent_loop.model_copy(
        update={
            "max_new_tokens": shaped_workload.max_new_tokens,
            "max_context_tokens": min(
                shaped_workload.max_context_tokens, model.config.max_context_tokens
            ),
            "recompute_page_tokens": engine.config.page_tokens,
        }
    )
    sources = tuple(_load_source(source, config, base_dir) for source in config.sources)
    names = [source.workload.name for source in sources]
    if len(set(names)) != len(names):
        raise ConfigError(
            f"the task sources' workloads share names {names}; session ids are prefixed by the "
            "workload name, so give each source's workload its own (an override name=...)"
        )
    policies, policy_origins = _policies(config, base_dir, registry)
    return Simulation(
        config=config,
        workload=shaped_workload,
        model=model.config,
        engine=engine.config,
        rollout=shaped_rollout,
        agent_loop=agent_loop,
        sources=sources,
        policies=policies,
        base_dir=base_dir,
        sections=sections,
        policy_origins=policy_origins,
    )


def _where(path: Path | None) -> str:
    return display_path(path) if path is not None else ""


def _sub(origins: Origins, prefix: str) -> Origins:
    """The origins under `prefix`, with the prefix taken off their paths."""
    inner = {
        path[1:]: origin
        for path, origin in origins.by_path.items()
        if path[:1] == (prefix,) and len(path) > 1
    }
    whole = origins.by_path.get((prefix,))
    return Origins(inner if whole is None else {(): whole, **inner})


def _policies(
    config: SimulateConfig, base_dir: Path, registry: PolicyRegistry | None
) -> tuple[tuple[RolloutPolicy, ...], dict[str, str]]:
    """Every listed policy, resolved (names must be unique), and how each reads in origins."""
    registry = registry or default_policy_registry()
    policies = tuple(registry.resolve(spec, base_dir) for spec in config.policies)
    names = [policy.name for policy in policies]
    if len(set(names)) != len(names):
        raise ConfigError(f"policy names repeat: {names}; give derived policies their own name")
    origins = {
        policy.name: policy_origin(spec)
        for policy, spec in zip(policies, config.policies, strict=True)
    }
    return policies, origins


def _load_source(source: SimTaskSourceConfig, config: SimulateConfig, base_dir: Path) -> SimSource:
    """A source with its workload (its group size) and its turn budget from the workload."""
    group_size = source.group_size or config.group_size
    workload = source.workload.load(WorkloadConfig, base_dir)
    workload = workload.model_copy(
        update={"group_size": group_size, "groups_per_step": config.groups_per_step}
    )
    task = TaskSourceConfig.model_validate(
        {
            **source.model_dump(exclude={"workload"}),
            "group_size": group_size,
            "max_new_tokens": source.max_new_tokens or workload.max_new_tokens,
        }
    )
    return SimSource(task, workload)
