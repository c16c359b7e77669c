from pathlib import Path

import pytest

from harness.config import load_config
from harness.errors import ConfigError
from harness.pool import PoolConfig
from tests.paths import REPO_ROOT


def test_defaults_load_without_a_file() -> None:
    assert load_config(PoolConfig).warm_per_image == 2


def test_unknown_key_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text("warm_per_imgae: 3\n")
    with pytest.raises(ConfigError, match="warm_per_imgae"):
        load_config(PoolConfig, path)


def test_override_sets_a_nested_field() -> None:
    config = load_config(PoolConfig, None, ["container.memory_mb=512", "act_slots=3"])
    assert (config.container.memory_mb, config.act_slots) == (512, 3)


def test_invalid_value_names_field_and_source(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text("act_slots: 0\n")
    with pytest.raises(ConfigError, match=r"pool\.yaml.*act_slots"):
        load_config(PoolConfig, path)


def test_override_without_equals_sign_is_explained() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        load_config(PoolConfig, None, ["act_slots"])


def test_shipped_pool_config_is_valid() -> None:
    config = load_config(PoolConfig, REPO_ROOT / "configs/pool/default.yaml")
    assert config.max_live >= config.warm_per_image
