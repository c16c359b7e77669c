"""Validated, frozen configuration objects loaded from `configs/*.yaml`.

Every component reads one `FrozenConfig` subclass. Fields carry a description and unit; unknown
keys are errors (a typo must not silently fall back to a default). `load_config` reads YAML,
applies `key=value` overrides from the command line and reports every problem with its field
path. A field that points at another file is a `ConfigRef` (a path plus overrides of its own);
a dotted override that walks into one (`pool.act_slots=4`) is handed to that file's overrides,
so every setting of every file can be changed from the command line in one spelling.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from foundation.errors import ConfigError

__all__ = [
    "MAX_CONFIG_DEPTH",
    "ConfigRef",
    "FrozenConfig",
    "apply_overrides",
    "load_config",
    "parse_config",
    "read_yaml_mapping",
]

ConfigT = TypeVar("ConfigT", bound="FrozenConfig")

MAX_CONFIG_DEPTH = 32
"""Deepest nesting a config file or override value may have. Every shipped config is under 6
levels deep; the bound turns a hostile or broken file (50,000 nested lists) into one clear
error instead of a RecursionError traceback."""


class FrozenConfig(BaseModel):
    """Base of all configs: immutable, and unknown keys are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class ConfigRef(FrozenConfig):
    """Another config file, with `key=value` overrides applied on top of it."""

    path: str = Field(
        min_length=1,
        description="YAML file; a relative path is relative to the file that names it.",
    )
    overrides: tuple[str, ...] = Field(
        default=(), description="Dotted key=value overrides, e.g. 'max_running_requests=64'."
    )

    def resolve(self, base_dir: Path) -> Path:
        """The file's path, with a relative `path` taken from `base_dir`."""
        path = Path(self.path)
        return path if path.is_absolute() else base_dir / path

    def load(self, model: type[ConfigT], base_dir: Path) -> ConfigT:
        """Load the file as `model` and apply the overrides."""
        return load_config(model, self.resolve(base_dir), self.overrides)


def apply_overrides(
    raw: Mapping[str, Any],
    overrides: Iterable[str],
    model: type[BaseModel] | None = None,
) -> dict[str, Any]:
    """Return a copy of `raw` with dotted `key=value` overrides applied (values parsed as YAML).

    With `model`, an override whose path reaches a `ConfigRef` field (`pool.act_slots=4` where
    `pool` names a file) is appended to that reference's own overrides (`act_slots=4`), to be
    applied when the file is loaded; `pool.path=...` still replaces the reference's path.
    """
    merged: dict[str, Any] = _deep_copy(raw)
    for override in overrides:
        if "=" not in override:
            raise ConfigError(
                f"override {override!r} is not of the form key=value (e.g. pool.warm_per_image=4)"
            )
        dotted_key, value_text = override.split("=", 1)
        keys = [key.strip() for key in dotted_key.strip().split(".")]
        if not all(keys):
            raise ConfigError(f"override {override!r}: empty key in {dotted_key!r}")
        ref_depth = _config_ref_depth(model, keys)
        if ref_depth is not None:
            _route_into_ref(merged, keys, ref_depth, value_text, override)
            continue
        node = merged
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {override!r}: {key!r} is not a section")
            node = child
        node[keys[-1]] = _parse_value(value_text, override)
    return merged


def _parse_value(value_text: str, override: str) -> Any:
    try:
        value = yaml.safe_load(value_text)
    except RecursionError:
        raise ConfigError(
            f"override {override!r}: the value nests deeper than {MAX_CONFIG_DEPTH} levels"
        ) from None
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise ConfigError(
            f"override {override!r}: the value is not valid YAML ({problem}); quote it, "
            "e.g. 'key=[a, b]' for a list"
        ) from exc
    _check_depth(value, f"override {override!r}")
    return value


def _config_ref_depth(model: type[BaseModel] | None, keys: list[str]) -> int | None:
    """How many leading `keys` lead to a `ConfigRef` field of `model` (None: none does, or
    the path names the reference's own `path` / `overrides`)."""
    current: type[BaseModel] | None = model
    for depth, key in enumerate(keys[:-1]):
        if current is None:
            return None
        field = current.model_fields.get(key)
        if field is None:
            return None
        target = _model_of(field.annotation)
        if target is not None and issubclass(target, ConfigRef):
            if keys[depth + 1] in ConfigRef.model_fields and len(keys) == depth + 2:
                return None  # pool.path=... / pool.overrides=[...]: the reference itself
            return depth + 1
        current = target
    return None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (through `X | None`), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        for argument in typing.get_args(annotation):
            found = _model_of(argument)
            if found is not None:
                return found
    return None


def _route_into_ref(
    merged: dict[str, Any], keys: list[str], depth: int, value_text: str, override: str
) -> None:
    node = merged
    for key in keys[: depth - 1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {override!r}: {key!r} is not a section")
        node = child
    ref = node.get(keys[depth - 1])
    if isinstance(ref, str):
        ref = {"path": ref}
    if not isinstance(ref, dict):
        where = ".".join(keys[:depth])
        raise ConfigError(
            f"override {override!r}: {where} names no config file here; set {where}.path first"
        )
    _parse_value(value_text, override)  # a bad value fails here, naming the whole override
    inner = ".".join(keys[depth:])
    ref = {**ref, "overrides": [*ref.get("overrides", ()), f"{inner}={value_text}"]}
    node[keys[depth - 1]] = ref


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


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML config file holds (an empty file is `{}`); every way the file can be
    unreadable, not YAML, not a mapping or nested too deep is a `ConfigError` naming it."""
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
    except RecursionError:
        raise ConfigError(
            f"config file {source} nests deeper than {MAX_CONFIG_DEPTH} levels; a config is a "
            "few levels of sections"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {source} is not valid YAML: {exc}") from exc
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {source} must hold a mapping at the top level")
    _check_depth(loaded, f"config file {source}")
    return loaded


def load_config(
    model: type[ConfigT], path: str | Path | None = None, overrides: Iterable[str] = ()
) -> ConfigT:
    """Load `path` (YAML; None means all defaults), apply overrides, validate."""
    raw: Mapping[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        source = str(path)
        raw = read_yaml_mapping(path)
    return parse_config(model, apply_overrides(raw, overrides, model), source=source)


def _check_depth(value: Any, where: str) -> None:
    """Raise `ConfigError` when `value` nests deeper than `MAX_CONFIG_DEPTH` (iteratively, so
    the check itself cannot overflow the stack)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise ConfigError(
                f"{where} nests deeper than {MAX_CONFIG_DEPTH} levels; a config is a few levels "
                "of sections"
            )
        if isinstance(node, Mapping):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list | tuple):
            stack.extend((child, depth + 1) for child in node)


def _deep_copy(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: _deep_copy(value) if isinstance(value, Mapping) else value
        for key, value in raw.items()
    }
