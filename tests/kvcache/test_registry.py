"""Building policies by config name."""

from __future__ import annotations

import pytest

from kvcache import (
    KVPolicy,
    KVPolicyRegistrationError,
    KVPolicyRegistry,
    LRUKVPolicy,
    PriorityKVPolicy,
    UnknownKVPolicyError,
    default_kv_policy_registry,
    make_kv_policy,
)
from tests.kvcache.helpers import spec_config


@pytest.mark.parametrize(
    ("name", "policy_type"), [("priority", PriorityKVPolicy), ("lru", LRUKVPolicy)]
)
def test_config_name_selects_the_policy(name: str, policy_type: type) -> None:
    assert isinstance(make_kv_policy(spec_config(policy=name)), policy_type)


@pytest.mark.parametrize("name", ["priority", "lru"])
def test_shipped_policies_satisfy_the_policy_protocol(name: str) -> None:
    assert isinstance(make_kv_policy(spec_config(policy=name)), KVPolicy)


def test_unknown_name_lists_the_registered_policies() -> None:
    with pytest.raises(UnknownKVPolicyError, match="Registered: lru, priority"):
        make_kv_policy(spec_config(policy="fifo"))


def test_unknown_name_suggests_the_closest_one() -> None:
    with pytest.raises(UnknownKVPolicyError, match="Did you mean 'priority'"):
        make_kv_policy(spec_config(policy="priorty"))


def test_a_duplicate_name_is_refused() -> None:
    registry = default_kv_policy_registry()
    with pytest.raises(KVPolicyRegistrationError, match="already registered"):
        registry.register("lru", lambda context: LRUKVPolicy(context.config))


@pytest.mark.parametrize("name", ["", "  ", " lru"])
def test_an_empty_or_padded_name_is_refused(name: str) -> None:
    with pytest.raises(KVPolicyRegistrationError):
        KVPolicyRegistry().register(name, lambda context: LRUKVPolicy(context.config))


def test_a_registered_factory_receives_the_config() -> None:
    registry = KVPolicyRegistry()
    registry.register("mine", lambda context: LRUKVPolicy(context.config))
    policy = make_kv_policy(spec_config(policy="mine"), registry)
    assert policy.config.policy == "mine"


def test_each_default_registry_is_a_fresh_object() -> None:
    first = default_kv_policy_registry()
    first.register("extra", lambda context: LRUKVPolicy(context.config))
    assert "extra" not in default_kv_policy_registry()
