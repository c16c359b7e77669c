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
cache thrashed: simulated T_next 2.7x worse than `traj_async`, KV hit rate 0.39.

`sync` is verl-classic batch-synchronous rollout; `traj_async` is trajectory-level async with
the same staleness bound (a sample keeps its agent slot through its tool calls); `aggressive`
inserts new work whenever a slot frees (ROLL-Flash-style); `kv_throttle` admits new work only
above a KV watermark (Concur-style). Ablations of ours: `no_priority`, `no_preemption`,
`no_kv_hints`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType

from rollout.runtime.config import PolicyConfig

__all__ = ["UnknownPolicyError", "builtin_policies", "resolve_policy"]


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
        _ours("no_priority", "ours without critical groups", critical_priority=False),
        _ours("no_preemption", "ours without preemption", preemption=False),
        _ours("no_kv_hints", "ours without KV hints, LRU KV", kv_hints=False, kv_policy="lru"),
    ]
    return MappingProxyType({policy.name: policy for policy in presets})


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
    }
    return PolicyConfig.model_validate(
        {"name": name, "description": f"{description}; FCFS, LRU KV", **baseline, **changes}
    )


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
