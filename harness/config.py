"""Validated, frozen configuration objects loaded from `configs/*.yaml`.

Every component reads one `FrozenConfig` subclass. Fields carry a description and unit; unknown
keys are errors (a typo must not silently fall back to a default). `load_config` reads YAML,
applies `key=value` overrides from the command line and reports every problem with its field path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import ConfigError

__all__ = ["FrozenConfig", "apply_overrides", "load_config", "parse_config"]

ConfigT = TypeVar("ConfigT", bound="FrozenConfig")


class FrozenConfig(BaseModel):
    """Base of all configs: immutable, and unknown keys are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a copy of `raw` with dotted `key=value` overrides applied (values parsed as YAML)."""
    merged: dict[str, Any] = _deep_copy(raw)
    for override in overrides:
        if "=" not in override:
            raise ConfigError(
                f"override {override!r} is not of the form key=value (e.g. pool.warm_per_image=4)"
            )
        dotted_key, value_text = override.split("=", 1)
        keys = dotted_key.strip().split(".")
        node = merged
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {override!r}: {key!r} is not a section")
            node = child
        try:
            node[keys[-1]] = yaml.safe_load(value_text)
        except yaml.YAMLError as exc:
            problem = str(exc).splitlines()[0]
            raise ConfigError(
                f"override {override!r}: the value is not valid YAML ({problem}); quote it, "
                "e.g. 'key=[a, b]' for a list"
            ) from exc
    return merged


def parse_config(
    model: type[ConfigT], raw: Mapping[str, Any], *, source: str = "<config>"
) -> ConfigT:
    """Validate `raw` against `model`; a failure names every bad field and the source."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}"
            for error in exc.errors()
        )
        raise ConfigError(f"{source}: invalid {model.__name__}: {problems}") from exc


def load_config(
    model: type[ConfigT], path: str | Path | None = None, overrides: Iterable[str] = ()
) -> ConfigT:
    """Load `path` (YAML; None means all defaults), apply overrides, validate."""
    raw: Mapping[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        source = str(path)
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"config file {source} does not exist") from exc
        except IsADirectoryError as exc:
            raise ConfigError(f"config {source} is a directory; give a YAML file") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {source} is not text; give a YAML file") from exc
        except OSError as exc:
            raise ConfigError(f"config file {source} cannot be read: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {source} is not valid YAML: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {source} must hold a mapping at the top level")
        raw = loaded
    return parse_config(model, apply_overrides(raw, overrides), source=source)


def _deep_copy(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: _deep_copy(value) if isinstance(value, Mapping) else value
        for key, value in raw.items()
    }
