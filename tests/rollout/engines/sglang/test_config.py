"""The SGLang client's config file and its validation."""

from __future__ import annotations

import pytest

from foundation.config import load_config
from foundation.errors import ConfigError
from rollout.engines.sglang import EngineStartupError, SGLangEngine, SGLangEngineConfig
from tests.paths import CONFIGS

SHIPPED = CONFIGS / "engine" / "sglang.yaml"


def test_the_shipped_file_matches_the_code_defaults() -> None:
    assert load_config(SGLangEngineConfig, SHIPPED) == SGLangEngineConfig()


def test_every_field_documents_itself() -> None:
    assert all(field.description for field in SGLangEngineConfig.model_fields.values())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("endpoints=[localhost:30000]", "must start with http"),
        ("endpoints=[http://a:1,http://a:1/]", "repeat"),
        ("pause_mode=freeze", "pause_mode"),
        ("max_attempts=0", "max_attempts"),
    ],
)
def test_bad_values_are_refused_with_the_field_named(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(SGLangEngineConfig, SHIPPED, [override])


def test_a_router_takes_exactly_one_url() -> None:
    config = SGLangEngineConfig(endpoints=("http://a:1", "http://b:1"), router=True)
    with pytest.raises(EngineStartupError, match="exactly one endpoint"):
        SGLangEngine(config)


def test_engine_per_endpoint_makes_one_named_engine_config_per_server() -> None:
    config = SGLangEngineConfig(endpoints=("http://a:1", "http://b:1"), engine_per_endpoint=True)
    parts = config.per_endpoint()
    assert [(part.name, part.endpoints) for part in parts] == [
        ("sglang-0", ("http://a:1",)),
        ("sglang-1", ("http://b:1",)),
    ]
    assert all(not part.engine_per_endpoint or len(part.endpoints) == 1 for part in parts)
    assert SGLangEngineConfig(endpoints=("http://a:1", "http://b:1")).per_endpoint() == (
        SGLangEngineConfig(endpoints=("http://a:1", "http://b:1")),
    )


def test_a_router_cannot_also_be_split_into_engines() -> None:
    with pytest.raises(ConfigError, match="choose one"):
        load_config(SGLangEngineConfig, SHIPPED, ["router=true", "engine_per_endpoint=true"])
