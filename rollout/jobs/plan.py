"""Resolve once: the rules every command's plan applies, in one documented order.

A command (`conductor run`, `simulate`, `bench rollout`) turns its config file and overrides
into a *plan*: every setting resolved once, with where it came from, before anything starts.
The rest of the code only reads the plan. The order, for every command:

1. the command's file, then its command-line overrides (`foundation.provenance.load_traced`);
2. each file it references (`ConfigRef`), then that reference's overrides: those written in the
   command's file first, then those routed from the command line (`pool.act_slots=4`);
3. the run's shape: B (`groups_per_step`), K (`group_size`), `async_factor` and `seed` into
   the decision cores' admission (`shape_run`); `simulate` also gives K to the workload and the
   workload's and model's turn limits to the agent loop;
4. the policy (`RolloutPolicy`): its scheduler flags and admission mode into the cores, its
   engine asks into the engine's config (the backend applies what it can, and every ask it
   cannot honour becomes a named warning, printed and kept in the plan's notes);
5. the check: a lower file (or an override of it) that sets a value steps 3-4 overwrite is an
   error that names the setting that wins and where to set it instead (`check_owned`).

Each plan writes `effective_config.yaml` into its run directory (`foundation.provenance`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.config import ConfigRef
from foundation.errors import ConfigError
from foundation.provenance import Origins, Section, display_path
from rollout.core.config import RolloutConfig
from rollout.runtime.policy import RolloutPolicy

__all__ = [
    "COMMAND_LINE",
    "POLICY_OWNED_ENGINE",
    "POLICY_OWNED_ROLLOUT",
    "RUN_SHAPE",
    "Owned",
    "check_owned",
    "labelled_ref_overrides",
    "mark_owned",
    "policy_section",
    "shape_run",
]

COMMAND_LINE = "command line"


@dataclass(frozen=True, slots=True)
class Owned:
    """A setting of a lower section that the plan sets itself (steps 3-4 of the order)."""

    path: tuple[str, ...]  # inside its section
    owner: str  # what sets it, in words
    instead: str  # where a user sets it instead


RUN_SHAPE = (
    Owned(("admission", "groups_per_step"), "B, the run's groups_per_step", "groups_per_step=N"),
    Owned(("admission", "group_size"), "K, the run's group_size", "group_size=N"),
    Owned(("admission", "async_factor"), "the run's async_factor", "async_factor=N"),
    Owned(("admission", "seed"), "the run's seed", "seed=N"),
)
"""Rollout-core settings the run's shape fixes (step 3)."""

_DERIVED = 'a derived policy, e.g. "policy={name: mine, base: conductor, FLAG: VALUE}"'

POLICY_OWNED_ROLLOUT = (
    Owned(("scheduler", "preemption"), "the policy's preemption flag", _DERIVED),
    Owned(("scheduler", "kv_residency"), "the policy's kv_residency flag", _DERIVED),
    Owned(
        ("scheduler", "kv_residency_live_projection"),
        "the policy's live_charge (off when its live gate charges growth)",
        _DERIVED,
    ),
    Owned(
        ("scheduler", "low_priority_kv_watermark"),
        "the policy's low_priority_kv_watermark flag",
        _DERIVED,
    ),
)
"""Rollout-core settings the policy fixes (step 4)."""

POLICY_OWNED_ENGINE = (
    Owned(("kv_backend",), "the policy's kv_policy flag", _DERIVED),
    Owned(("schedule_policy",), "the policy's engine_priority_scheduling flag", _DERIVED),
)
"""Simulated-engine settings the policy fixes (step 4)."""


def check_owned(section: str, where: str, origins: Origins, owned: Iterable[Owned]) -> None:
    """Raise `ConfigError` naming every owned setting that `origins` says a file or override
    set (`where` names the section's file)."""
    problems = [
        f"{section}.{'.'.join(rule.path)} is set {_where_set(origins.of(rule.path))} (the "
        f"{section} settings of {where}), but {rule.owner} sets it and would overwrite it: "
        f"remove it there and set it with {rule.instead}"
        for rule in owned
        if origins.explicit(rule.path)
    ]
    if problems:
        raise ConfigError("; ".join(problems))


def _where_set(origin: str) -> str:
    return "on the command line" if origin == COMMAND_LINE else f"in {origin}"


def mark_owned(origins: Origins, owned: Iterable[Owned], origin: str) -> None:
    """Record `origin` as where each owned setting's value comes from."""
    for rule in owned:
        origins.set_by(rule.path, origin)


def shape_run(
    rollout: RolloutConfig, *, groups_per_step: int, group_size: int, async_factor: int, seed: int
) -> RolloutConfig:
    """`rollout` with a run's batch shape (B, K), staleness bound and seed in its admission."""
    admission = rollout.admission.model_copy(
        update={
            "groups_per_step": groups_per_step,
            "group_size": group_size,
            "async_factor": async_factor,
            "seed": seed,
        }
    )
    return rollout.model_copy(update={"admission": admission})


def labelled_ref_overrides(
    ref: ConfigRef, raw_ref: Any, field: str, parent: Path | None
) -> list[tuple[str, str]]:
    """`ref`'s overrides, each with where it was written: in the parent file (`raw_ref` is the
    reference as that file wrote it) or on the command line (routed there, or the whole list
    replaced)."""
    written: Sequence[str] = ()
    if isinstance(raw_ref, Mapping):
        written = tuple(str(item) for item in raw_ref.get("overrides", ()) or ())
    in_file = f"{display_path(parent)} ({field}.overrides)" if parent else COMMAND_LINE
    if tuple(ref.overrides[: len(written)]) != tuple(written):
        return [(text, COMMAND_LINE) for text in ref.overrides]
    return [
        (text, in_file if index < len(written) else COMMAND_LINE)
        for index, text in enumerate(ref.overrides)
    ]


def policy_section(policy: RolloutPolicy, origin: str) -> Section:
    """The policy's flags as an effective-config section, every one from `origin`."""
    values = policy.config.model_dump(mode="json")
    origins = Origins({(key,): origin for key in values})
    return Section("policy", values, origins, f"{type(policy).__name__}, {origin}")


def policy_origin(spec: Any) -> str:
    """How a policy spec reads in origins: a preset, a derived policy or your own."""
    if isinstance(spec, str):
        return f"policy {spec}" if ":" not in spec else f"your policy {spec}"
    base = spec.get("base", "conductor") if isinstance(spec, Mapping) else "conductor"
    return f"policy {spec.get('name')} (derived from {base})"
