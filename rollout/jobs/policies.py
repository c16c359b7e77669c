"""The rollout policies and baselines, as presets of one conductor's flags (DESIGN.md §5).

Every policy runs the same conductor, engine simulator, workload and seed; only the flags of
`PolicyConfig` differ, so a comparison measures the policy and nothing else:

==============  =========  ========  =========  =====  ============  ===============
policy          priority   preempt   watermark  KV     admission     slot held for
==============  =========  ========  =========  =====  ============  ===============
conductor       critical   yes       0.1        prio   staleness     one action
sync            —          —         —          LRU    synchronous   one action
traj_async      —          —         —          LRU    staleness     whole trajectory
aggressive      —          —         —          LRU    staleness     one action
kv_throttle     —          —         0.2        LRU    staleness     one action
==============  =========  ========  =========  =====  ============  ===============

Ours also bounds its live samples by KV (`live_kv_budget` = 1.0: a new sample starts only
while the live contexts fit the device KV pool; rollout/runtime/live_gate.py). Without it, at
64 groups x 8 samples of the SWE-like workload every admitted sample was live at once and the
cache thrashed: simulated T_next 2.7x worse than `traj_async`, KV hit rate 0.39. And ours checks
the device KV at every generation (`kv_residency`, rollout/core/kv_residency.py): without it,
on the 32B-like SWE case, ours was 1.10x slower [0.95-1.30] and recomputed 3.6 M tokens instead
of 0.8 M (simulated, 5 seeds; docs/benchmarks.md).

`sync` is verl-classic batch-synchronous rollout; `traj_async` is trajectory-level async with
the same staleness bound (a sample keeps its agent slot through its tool calls); `aggressive`
inserts new work whenever a slot frees (ROLL-Flash-style); `kv_throttle` admits new work only
above a KV watermark (Concur-style). The ablations of ours remove exactly one mechanism from the
`conductor` preset (everything else, the live-KV gate included, stays): `no_priority` (critical
groups), `no_preemption`, `no_kv_hints` (priority KV and its session hints: LRU KV instead),
`no_live_gate`, `no_kv_residency` (the per-turn device-KV check and KV-pressure preemption of
rollout/core/kv_residency.py).

A run names presets, or derives its own with `resolve_policy_spec`: a mapping with a `name`, a
`base` preset (default `conductor`) and any `PolicyConfig` flags to change, for example
`{name: gate_half, base: conductor, live_kv_budget: 0.5}`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from rollout.runtime.config import PolicyConfig

__all__ = [
    "PolicySpec",
    "UnknownPolicyError",
    "builtin_policies",
    "resolve_policy",
    "resolve_policy_spec",
]


class UnknownPolicyError(ValueError):
    """A policy name that is not a preset."""


def builtin_policies() -> Mapping[str, PolicyConfig]:
    """Every preset by name (a fresh read-only mapping; see the module docstring)."""
    presets = [
        _ours(
            "conductor",
            "ours: action-level, critical groups, preemption, priority KV",
            live_kv_budget=1.0,
        ),
        _fcfs("sync", "batch-synchronous: admit B, wait for all, train", admission="synchronous"),
        _fcfs("traj_async", "trajectory-level async, same bound", slot_holding="trajectory"),
        _fcfs("aggressive", "action-level, new work whenever a slot frees"),
        _fcfs(
            "kv_throttle", "action-level, new work above 20% free KV", low_priority_kv_watermark=0.2
        ),
    ]
    ours = presets[0]
    presets += [
        _without(ours, "no_priority", "critical groups", critical_priority=False),
        _without(ours, "no_preemption", "preemption", preemption=False),
        _without(
            ours, "no_kv_hints", "priority KV and hints (LRU KV)", kv_hints=False, kv_policy="lru"
        ),
        _without(ours, "no_live_gate", "the live-KV gate", live_kv_budget=0.0),
        _without(ours, "no_kv_residency", "per-turn KV residency", kv_residency=False),
    ]
    return MappingProxyType({policy.name: policy for policy in presets})


def _without(ours: PolicyConfig, name: str, mechanism: str, **changes: object) -> PolicyConfig:
    """A single-factor ablation: `ours` with exactly `changes`."""
    description = f"ours without {mechanism}"
    return ours.model_copy(update={"name": name, "description": description, **changes})


def _ours(name: str, description: str, **changes: object) -> PolicyConfig:
    """Our policy (the `PolicyConfig` defaults) with `changes`."""
    return PolicyConfig.model_validate({"name": name, "description": description, **changes})


def _fcfs(name: str, description: str, **changes: object) -> PolicyConfig:
    """A baseline: no priority, no preemption, no throttle, LRU KV, FCFS engine; then `changes`."""
    baseline = {
        "critical_priority": False,
        "preemption": False,
        "low_priority_kv_watermark": 0.0,
        "kv_policy": "lru",
        "kv_hints": False,
        "engine_priority_scheduling": False,
        "kv_residency": False,
    }
    return PolicyConfig.model_validate(
        {"name": name, "description": f"{description}; FCFS, LRU KV", **baseline, **changes}
    )


PolicySpec = str | Mapping[str, Any]
"""A preset's name, or `{name, base?, description?, <PolicyConfig flag>: value, ...}`."""


def resolve_policy_spec(spec: PolicySpec) -> PolicyConfig:
    """The policy `spec` names or derives (`UnknownPolicyError` for an unknown base, ValueError
    naming the bad flag otherwise)."""
    if isinstance(spec, str):
        return resolve_policy(spec)
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        raise ValueError(f"a derived policy needs a name: {dict(spec)!r}")
    changes = dict(spec)
    base = resolve_policy(str(changes.pop("base", "conductor")))
    changes.setdefault("description", f"{base.name} with {_flags_text(changes)}")
    try:
        return PolicyConfig.model_validate({**base.model_dump(), **changes})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise ValueError(f"policy {spec['name']!r}: {problems}") from None


def _flags_text(changes: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in changes.items() if key != "name")


def resolve_policy(name: str) -> PolicyConfig:
    """The preset called `name`; `UnknownPolicyError` lists the presets and the closest one."""
    policies = builtin_policies()
    policy = policies.get(name)
    if policy is None:
        close = difflib.get_close_matches(name, list(policies), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownPolicyError(
            f"no rollout policy {name!r}{hint} Known policies: {', '.join(policies)}"
        )
    return policy
