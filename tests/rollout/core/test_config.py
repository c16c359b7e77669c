"""Spec of the rollout configuration file."""

from __future__ import annotations

import pytest

from foundation.config import load_config
from foundation.errors import ConfigError
from rollout.core.config import RolloutConfig
from tests.paths import CONFIGS

DEFAULT = CONFIGS / "rollout" / "default.yaml"


def test_shipped_default_file_matches_the_code_defaults() -> None:
    assert load_config(RolloutConfig, DEFAULT) == RolloutConfig()


def test_every_field_documents_itself() -> None:
    def undocumented(model: type) -> list[str]:
        missing = []
        for name, field in model.model_fields.items():  # type: ignore[attr-defined]
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                missing += [f"{name}.{inner}" for inner in undocumented(annotation)]
            elif not field.description:
                missing.append(name)
        return missing

    assert undocumented(RolloutConfig) == []


def test_unknown_key_is_rejected() -> None:
    with pytest.raises(ConfigError, match="schedulr"):
        load_config(RolloutConfig, DEFAULT, ["schedulr.preemption=false"])


def test_watermark_outside_zero_to_one_is_rejected() -> None:
    with pytest.raises(ConfigError, match="low_priority_kv_watermark"):
        load_config(RolloutConfig, DEFAULT, ["scheduler.low_priority_kv_watermark=1.5"])


def test_mlp_that_could_never_warm_up_is_rejected() -> None:
    with pytest.raises(ConfigError, match="min_examples"):
        load_config(RolloutConfig, DEFAULT, ["predictor.mlp.min_examples=100000"])
