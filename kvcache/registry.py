"""`KVPolicyRegistry`: build a KV policy by config name; unknown names get a helpful error.

There is no global registry: `default_kv_policy_registry()` builds a fresh one holding the
shipped policies, and callers pass registries around (STYLE.md §1, §5).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from kvcache.config import KVCacheConfig
from kvcache.errors import KVPolicyRegistrationError, UnknownKVPolicyError
from kvcache.lru_policy import LRUKVPolicy
from kvcache.policy import KVPolicy
from kvcache.priority_policy import PriorityKVPolicy

__all__ = [
    "KVPolicyBuildContext",
    "KVPolicyFactory",
    "KVPolicyRegistry",
    "default_kv_policy_registry",
    "make_kv_policy",
]


@dataclass(frozen=True, slots=True)
class KVPolicyBuildContext:
    """Everything a policy factory may use."""

    config: KVCacheConfig


KVPolicyFactory = Callable[[KVPolicyBuildContext], KVPolicy]


class KVPolicyRegistry:
    """Policy factories by name. Rejects empty and duplicate names."""

    def __init__(self) -> None:
        self._factories: dict[str, KVPolicyFactory] = {}

    def register(self, name: str, factory: KVPolicyFactory) -> None:
        """Register `factory` under `name` (non-empty, not yet registered)."""
        if not name or not name.strip() or name != name.strip():
            raise KVPolicyRegistrationError(
                f"policy name {name!r} must be non-empty without surrounding whitespace"
            )
        if name in self._factories:
            raise KVPolicyRegistrationError(
                f"a KV policy named {name!r} is already registered; pick another name"
            )
        self._factories[name] = factory

    def names(self) -> tuple[str, ...]:
        """Registered names, sorted."""
        return tuple(sorted(self._factories))

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def create(self, config: KVCacheConfig) -> KVPolicy:
        """Build the policy named by `config.policy`."""
        factory = self._factories.get(config.policy)
        if factory is None:
            raise UnknownKVPolicyError(self._unknown_message(config.policy))
        return factory(KVPolicyBuildContext(config=config))

    def _unknown_message(self, name: str) -> str:
        registered = ", ".join(self.names()) or "(none)"
        close = difflib.get_close_matches(name, self._factories, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return (
            f"no KV policy named {name!r}.{hint} Registered: {registered}. Set `policy` in the "
            "kvcache config to one of these, or call `registry.register(name, factory)` first."
        )


def default_kv_policy_registry() -> KVPolicyRegistry:
    """A new registry with the shipped policies: 'priority' (ours) and 'lru' (baseline)."""
    registry = KVPolicyRegistry()
    registry.register("priority", lambda context: PriorityKVPolicy(context.config))
    registry.register("lru", lambda context: LRUKVPolicy(context.config))
    return registry


def make_kv_policy(config: KVCacheConfig, registry: KVPolicyRegistry | None = None) -> KVPolicy:
    """Build the configured policy from `registry` (default: the shipped policies)."""
    return (registry if registry is not None else default_kv_policy_registry()).create(config)
