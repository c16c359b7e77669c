"""The rollout policies and baselines: a registry of `RolloutPolicy` objects (DESIGN.md §5).

Every policy runs the same conductor, engine simulator, workload and seed; only the flags of
`PolicyConfig` differ, so a comparison measures the policy and nothing else:

=================  =========  ========  =========  =====  ============  ====================
policy             priority   preempt   watermark  KV     admission     slot held for
=================  =========  ========  =========  =====  ============  ====================
conductor          critical   yes       0.1        prio   staleness     one action
sync               —          —         —          LRU    synchronous   one action
traj_async         —          —         —          LRU    staleness     whole trajectory
aggressive         —          —         —          LRU    staleness     one action
kv_throttle        —          —         0.2        LRU    staleness     one action
adaptive_inflight  —          —         —          LRU    staleness     trajectory, adaptive
sample_refill      —          —         —          LRU    staleness     trajectory, B×K slots
=================  =========  ========  =========  =====  ============  ====================

Ours also bounds its live samples by KV (`live_kv_budget` = 1.0: a new sample starts only
while the live samples' *expected final* contexts fit the device and host KV tier;
rollout/runtime/live_gate.py, rollout/core/final_context.py). The expected final context is a
censored estimate from the run's finished and live samples, with what the run has not seen at the
context limit: no prior to tune. Charging today's context instead (`no_growth_charge`, the
preset until issue 27) admits a wave of young samples that outgrow the pool together: on the
growth workload (contexts grow ~6x per trajectory, B=16) 1.05x slower [0.99-1.22] with 2.4x
the recomputation (simulated, 5 seeds, docs/benchmarks.md). Without it, at
64 groups x 8 samples of the SWE-like workload every admitted sample was live at once and the
cache thrashed: simulated T_next 2.7x worse than `traj_async`, KV hit rate 0.39. And ours checks
the device KV at every generation (`kv_residency`, rollout/core/kv_residency.py): without it,
on the 32B-like SWE case, ours was 1.10x slower [0.95-1.30] and recomputed 3.6 M tokens instead
of 0.8 M (simulated, 5 seeds; docs/benchmarks.md).

`sync` is verl-classic batch-synchronous rollout; `traj_async` is trajectory-level async with
the same staleness bound (a sample keeps its agent slot through its tool calls); `aggressive`
inserts new work whenever a slot frees (ROLL-Flash-style); `kv_throttle` admits new work only
above a KV watermark (Concur-style).

The knob-free peers (`rollout.runtime.peer_policies`) are `traj_async` with a bound that needs
no tuning, each constant its source's default and configuration:

* `adaptive_inflight`: prime-rl's adaptive in-flight control (PrimeIntellect-ai/prime-rl,
  `src/prime_rl/orchestrator/concurrency.py` on main, 559b447, PRs #3285 and #3307): the cap on
  in-flight episodes starts at KV capacity ÷ the longest episode, grows ×1.25 per turnover
  while the engines are clear (device-KV use ≤ 0.6, no queue, no preemption), is trimmed above
  0.8 use, and above 0.9 use or on preemptions the youngest groups are cancelled (here:
  restarted from scratch on the same prompt) (`rollout.core.inflight_control`);
* `sample_refill`: AReaL's sample-level refill (areal-project/AReaL PR #1722, −20.5 % time to
  ten batches on SWE-bench Verified, B16 × K8, 128 sample slots): B × K sample slots (AReaL's
  default concurrency, B groups, counted in samples), a new group admitted whole when K slots
  are free, a finished sample freeing its slot at once, where group-level admission waits for
  the whole group (`rollout.core.group_slots`). AReaL's staleness bound counts prompt groups
  ((version + 1 + max_head_offpolicyness) × batch), as our admission does; its token-age loss
  mask is a trainer-side part this rollout layer leaves out.

A derived policy changes their constants too: `{name: grow_07, base: adaptive_inflight,
inflight: {kv_usage_grow: 0.7}}`, `{name: refill_2x, base: sample_refill,
sample_slots_per_batch: 2.0}`. The ablations of ours remove exactly one mechanism from the
`conductor` preset (everything else, the live-KV gate included, stays): `no_priority` (critical
groups), `no_preemption`, `no_kv_hints` (priority KV and its session hints: LRU KV instead),
`no_live_gate`, `no_kv_residency` (the per-turn device-KV check and KV-pressure preemption of
rollout/core/kv_residency.py), `no_growth_charge` (the gate charges today's contexts against the
device KV alone).

Other live charges and bounds of ours are options, measured in docs/benchmarks.md (issue 27):
`live_charge: remaining_mean | peak` (a live sample's predicted growth,
`rollout/core/context_growth.py`) and `live_bound: recompute` (a count of live samples that
backs off when the engines recompute, `rollout/core/recompute_control.py`), e.g. `{name:
ours_rc, base: conductor, live_bound: recompute}`. Two refinements of the residency check are
the rollout config's, not a policy's (`scheduler.kv_residency_shared_prefix`,
`scheduler.kv_residency_adaptive_room`, on by default since session 16: simulated, ours 0.96x
on swe_like/32B and 0.94-1.00x on the growth family with both, never slower on a cell measured).

A run names a policy in one of three ways (`PolicyRegistry.resolve`):

* a registered name (the presets above, or one you `register`);
* a derived policy: a mapping with a `name`, a `base` (default `conductor`) and any
  `PolicyConfig` flags to change, e.g. `{name: gate_half, base: conductor, live_kv_budget: 0.5}`;
* your own, by dotted path: `package.module:name` or `path/to/file.py:name`, naming a
  `RolloutPolicy` (usually a subclass overriding `live_limit`) or a function of no arguments
  that returns one (docs/design.md, "Add a policy").

There is no global registry: `default_policy_registry()` builds a fresh one with the presets.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from foundation.errors import ConfigError
from foundation.loading import is_object_spec, load_object
from rollout.runtime.config import PolicyConfig
from rollout.runtime.peer_policies import (
    AdaptiveInflightConfig,
    AdaptiveInflightPolicy,
    SampleRefillConfig,
    SampleRefillPolicy,
)
from rollout.runtime.policy import RolloutPolicy

__all__ = [
    "PolicyRegistry",
    "PolicySpec",
    "UnknownPolicyError",
    "builtin_policies",
    "default_policy_registry",
    "resolve_policy",
    "resolve_policy_spec",
]

PolicyFactory = Callable[[], RolloutPolicy]

PolicySpec = str | Mapping[str, Any]
"""A registered name, a dotted path, or `{name, base?, description?, <flag>: value, ...}`."""


class UnknownPolicyError(ConfigError):
    """A policy name that is not registered (the message lists them and the closest)."""


class PolicyRegistry:
    """Named rollout policies; refuses empty and duplicate names (`kvcache/registry.py`'s rules)."""

    def __init__(self) -> None:
        self._factories: dict[str, PolicyFactory] = {}

    def register(self, name: str, factory: PolicyFactory) -> None:
        """Add policy `name`, made by `factory` (called anew for every run)."""
        if not name or not name.strip():
            raise ValueError("a policy needs a non-empty name")
        if name in self._factories:
            raise ValueError(f"policy {name!r} is already registered; pick another name")
        self._factories[name] = factory

    def names(self) -> tuple[str, ...]:
        return tuple(self._factories)

    def create(self, name: str) -> RolloutPolicy:
        """A fresh policy `name`; `UnknownPolicyError` lists the names and the closest one."""
        factory = self._factories.get(name)
        if factory is None:
            close = difflib.get_close_matches(name, list(self._factories), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UnknownPolicyError(
                f"no rollout policy {name!r}{hint} Known policies: {', '.join(self._factories)}"
                "; or name your own as package.module:name"
            )
        return factory()

    def resolve(self, spec: PolicySpec, base_dir: Path | None = None) -> RolloutPolicy:
        """The policy `spec` names, derives or loads (see the module docstring); a bad spec
        is a `ConfigError` naming the bad flag or name."""
        if isinstance(spec, str):
            if is_object_spec(spec):
                return _load_user_policy(spec, base_dir)
            return self.create(spec)
        if not isinstance(spec.get("name"), str) or not spec["name"]:
            raise ConfigError(f"a derived policy needs a name: {dict(spec)!r}")
        changes = dict(spec)
        base = self.resolve(str(changes.pop("base", "conductor")), base_dir)
        changes.setdefault("description", f"{base.name} with {_flags_text(changes)}")
        try:  # the base's own kind of flags: a peer's constants can be derived too
            config = type(base.config).model_validate({**base.config.model_dump(), **changes})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                for error in exc.errors()
            )
            raise ConfigError(f"policy {spec['name']!r}: {problems}") from None
        return base.with_config(config)


def _load_user_policy(spec: str, base_dir: Path | None) -> RolloutPolicy:
    found = load_object(spec, base_dir, what="policy")
    policy = found() if callable(found) and not isinstance(found, RolloutPolicy) else found
    if not isinstance(policy, RolloutPolicy):
        raise ConfigError(
            f"policy {spec!r} is a {type(policy).__name__}, not a RolloutPolicy (or a function "
            "returning one)"
        )
    return policy


def _flags_text(changes: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in changes.items() if key != "name")


def default_policy_registry() -> PolicyRegistry:
    """A fresh registry holding every preset of the module docstring."""
    registry = PolicyRegistry()
    for config in _preset_configs():
        registry.register(config.name, _preset(config))
    registry.register("adaptive_inflight", _adaptive_inflight)
    registry.register("sample_refill", _sample_refill)
    return registry


def _adaptive_inflight() -> RolloutPolicy:
    flags = _fcfs(
        "adaptive_inflight",
        "prime-rl's adaptive in-flight cap (KV use), trajectory-level",
        slot_holding="trajectory",
    )
    return AdaptiveInflightPolicy(AdaptiveInflightConfig.model_validate(flags.model_dump()))


def _sample_refill() -> RolloutPolicy:
    flags = _fcfs(
        "sample_refill",
        "AReaL's sample-level refill: B×K slots, a group admitted whole, trajectory-level",
        slot_holding="trajectory",
    )
    return SampleRefillPolicy(SampleRefillConfig.model_validate(flags.model_dump()))


def _preset(config: PolicyConfig) -> PolicyFactory:
    """A factory of fresh `RolloutPolicy` objects with `config`'s flags."""

    def make() -> RolloutPolicy:
        return RolloutPolicy(config)

    return make


def builtin_policies() -> Mapping[str, RolloutPolicy]:
    """Every preset by name (fresh objects)."""
    registry = default_policy_registry()
    return {name: registry.create(name) for name in registry.names()}


def resolve_policy(name: str) -> RolloutPolicy:
    """The preset called `name` (`UnknownPolicyError` lists the presets and the closest one)."""
    return default_policy_registry().create(name)


def resolve_policy_spec(spec: PolicySpec, base_dir: Path | None = None) -> RolloutPolicy:
    """`default_policy_registry().resolve(spec, base_dir)`."""
    return default_policy_registry().resolve(spec, base_dir)


def _preset_configs() -> list[PolicyConfig]:
    """The presets' flags (see the module docstring's table)."""
    presets = [
        _ours(
            "conductor",
            "ours: action-level, critical groups, preemption, priority KV, growth-aware live KV",
            live_kv_budget=1.0,
            live_charge="expected_final",
            live_kv_tier="device_and_host",
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
            ours,
            "no_kv_hints",
            "priority KV and hints (LRU KV)",
            kv_hints=False,
            kv_policy="radix_lru",
        ),
        _without(ours, "no_live_gate", "the live-KV gate", live_kv_budget=0.0),
        _without(ours, "no_kv_residency", "per-turn KV residency", kv_residency=False),
        _without(
            ours,
            "no_growth_charge",
            "growth-aware live charges (today's contexts against the device KV)",
            live_charge="current",
            live_kv_tier="device",
        ),
    ]
    return presets


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
        "kv_policy": "radix_lru",
        "kv_hints": False,
        "engine_priority_scheduling": False,
        "kv_residency": False,
    }
    return PolicyConfig.model_validate(
        {"name": name, "description": f"{description}; FCFS, LRU KV", **baseline, **changes}
    )
