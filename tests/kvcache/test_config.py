"""`KVCacheConfig` and its YAML file."""

from __future__ import annotations

import pytest
import yaml

from foundation.config import load_config
from foundation.errors import ConfigError
from kvcache import KVCacheConfig
from tests.paths import CONFIGS

SIM_ENGINE_YAML = CONFIGS / "engine" / "sim.yaml"


def test_the_kv_policy_of_runs_is_the_sim_engine_files_kvcache_section() -> None:
    """One home: the simulated engine's `kvcache` section (no separate kvcache file)."""
    assert not (CONFIGS / "kvcache" / "default.yaml").exists()
    section = yaml.safe_load(SIM_ENGINE_YAML.read_text())["kvcache"]
    assert load_config(KVCacheConfig, None, [f"{k}={v}" for k, v in section.items()]).policy


def test_every_field_documents_its_meaning() -> None:
    missing = [name for name, field in KVCacheConfig.model_fields.items() if not field.description]
    assert missing == []


def test_an_unknown_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match="page_sise"):
        load_config(KVCacheConfig, None, ["page_sise=16"])


def test_a_device_smaller_than_a_page_is_refused() -> None:
    with pytest.raises(ConfigError, match="smaller than one page"):
        load_config(KVCacheConfig, None, ["page_size=64", "device_capacity_tokens=10"])


def test_a_backoff_cap_below_the_first_group_is_refused() -> None:
    with pytest.raises(ConfigError, match="backoff_max_group"):
        load_config(KVCacheConfig, None, ["backoff_initial_group=8", "backoff_max_group=4"])
