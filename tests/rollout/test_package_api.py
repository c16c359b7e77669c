"""The `rollout` package root: its public names, each loaded from its home module on use."""

from __future__ import annotations

import importlib

import pytest

import rollout


def test_the_public_names_are_pinned() -> None:
    assert rollout.__all__ == sorted(rollout.__all__)
    assert set(rollout.__all__) >= {"Conductor", "Batch", "AgentLoop", "EnvSession", "RunConfig"}


@pytest.mark.parametrize("name", rollout.__all__)
def test_every_public_name_resolves_to_its_home_module_object(name: str) -> None:
    value = getattr(rollout, name)
    home = importlib.import_module(value.__module__)
    assert getattr(home, name) is value


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Conducter'"):
        _ = rollout.Conducter  # type: ignore[attr-defined]
