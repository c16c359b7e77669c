from pathlib import Path
from typing import Any

import pytest

from foundation.config import MAX_CONFIG_DEPTH, ConfigRef, FrozenConfig, load_config
from foundation.errors import ConfigError
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


@pytest.mark.parametrize(
    ("make", "overrides", "message"),
    [
        (lambda tmp: tmp, (), "is a directory"),
        (lambda tmp: _write_bytes(tmp / "bin.yaml", b"\x7fELF\xd0\xff"), (), "is not text"),
        (lambda tmp: None, ("steps=[",), "is not valid YAML"),
    ],
)
def test_bad_config_inputs_are_one_line_errors_that_say_what_to_do(
    tmp_path: Path, make: Any, overrides: tuple[str, ...], message: str
) -> None:
    """Fault 14: a directory, a binary file or `steps=[` printed a traceback."""
    with pytest.raises(ConfigError, match=message):
        load_config(_Sample, make(tmp_path), overrides)


class _Sample(FrozenConfig):
    steps: tuple[int, ...] = ()


def _write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


class _Inner(FrozenConfig):
    act_slots: int = 1


class _Outer(FrozenConfig):
    steps: int = 1
    pool: ConfigRef
    spare: ConfigRef | None = None


def test_a_dotted_override_through_a_file_reference_joins_that_files_overrides(
    tmp_path: Path,
) -> None:
    (tmp_path / "pool.yaml").write_text("act_slots: 2\n")
    (tmp_path / "run.yaml").write_text("pool: {path: pool.yaml, overrides: [act_slots=3]}\n")
    outer = load_config(_Outer, tmp_path / "run.yaml", ["pool.act_slots=4", "steps=2"])
    assert outer.pool.overrides == ("act_slots=3", "act_slots=4")
    assert outer.pool.load(_Inner, tmp_path).act_slots == 4  # the last override wins
    assert outer.steps == 2


def test_a_dotted_override_of_the_references_own_path_replaces_the_path(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text("pool: {path: pool.yaml}\n")
    outer = load_config(_Outer, tmp_path / "run.yaml", ["pool.path=other.yaml"])
    assert outer.pool.path == "other.yaml"


def test_a_dotted_override_into_an_unset_optional_reference_says_to_set_its_path(
    tmp_path: Path,
) -> None:
    (tmp_path / "run.yaml").write_text("pool: {path: pool.yaml}\n")
    with pytest.raises(ConfigError, match=r"spare.path"):
        load_config(_Outer, tmp_path / "run.yaml", ["spare.act_slots=4"])


def test_a_config_nested_fifty_thousand_deep_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ConfigError, match=f"deeper than {MAX_CONFIG_DEPTH}"):
        load_config(_Outer, path)


def test_an_override_value_nested_too_deep_is_one_clear_error() -> None:
    deep = "[" * (MAX_CONFIG_DEPTH + 2) + "]" * (MAX_CONFIG_DEPTH + 2)
    with pytest.raises(ConfigError, match="deeper than"):
        load_config(PoolConfig, None, [f"act_slots={deep}"])
