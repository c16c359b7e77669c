"""Where each setting came from: traced config loads and the `effective_config.yaml` writer.

A command resolves its settings from several files, overrides in those files, overrides on the
command line, presets (a policy) and values derived from other settings (B, K, the seed). The
run directory keeps the result as `effective_config.yaml`: every setting as the run used it,
each line ending in a comment that says where its value came from, so "why did my run use 64
slots?" has a one-line answer. The file is valid YAML (the comments are comments).

* `load_traced`: `load_config`, plus the origin of every leaf the file or an override set;
* `Origins`: leaf path -> origin, with `set_by` for values a command fixes itself;
* `effective_config_text`: the sections as commented YAML.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml

from foundation.config import FrozenConfig, apply_overrides, parse_config, read_yaml_mapping

__all__ = [
    "DEFAULT_ORIGIN",
    "Origins",
    "Section",
    "Traced",
    "display_path",
    "effective_config_text",
    "leaf_paths",
    "load_traced",
]

ConfigT = TypeVar("ConfigT", bound=FrozenConfig)
LeafPath = tuple[str, ...]

DEFAULT_ORIGIN = "default"


def display_path(path: str | Path) -> str:
    """`path` relative to the working directory when it lies under it (shorter, portable)."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(Path.cwd()))
    except ValueError:
        return str(resolved)


@dataclass(slots=True)
class Origins:
    """Leaf path -> where its value came from; unlisted leaves kept their default."""

    by_path: dict[LeafPath, str] = field(default_factory=dict)

    def of(self, path: LeafPath) -> str:
        """The origin of `path`, or of the nearest listed section above it."""
        for end in range(len(path), 0, -1):
            found = self.by_path.get(path[:end])
            if found is not None:
                return found
        return DEFAULT_ORIGIN

    def explicit(self, path: LeafPath) -> bool:
        """Whether a file or an override set `path` (or a section holding it)."""
        return self.of(path) != DEFAULT_ORIGIN

    def set_by(self, path: LeafPath, origin: str) -> None:
        """Record that `origin` (a plan rule, a preset) fixed `path` (and what is under it)."""
        for known in [known for known in self.by_path if known[: len(path)] == path]:
            del self.by_path[known]
        self.by_path[path] = origin


@dataclass(frozen=True, slots=True)
class Traced(Generic[ConfigT]):
    """A loaded config and where each of its explicitly set leaves came from."""

    config: ConfigT
    origins: Origins


def leaf_paths(raw: Mapping[str, Any], prefix: LeafPath = ()) -> Iterator[LeafPath]:
    """The paths of every non-mapping value under `raw` (lists are leaves)."""
    for key, value in raw.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from leaf_paths(value, path)
        else:
            yield path


def load_traced(
    model: type[ConfigT],
    path: str | Path | None,
    overrides: Sequence[tuple[str, str]] = (),
) -> Traced[ConfigT]:
    """`load_config(model, path, [text for text, _ in overrides])` with origins: the file's
    leaves are labelled with its path, each override's leaf with its own label."""
    raw: dict[str, Any] = {} if path is None else read_yaml_mapping(path)
    origins = Origins()
    if path is not None:
        label = display_path(path)
        for leaf in leaf_paths(raw):
            origins.by_path[leaf] = label
    texts = [text for text, _ in overrides]
    for text, label in overrides:
        key = text.split("=", 1)[0].strip()
        origins.set_by(tuple(part.strip() for part in key.split(".")), label)
    merged = apply_overrides(raw, texts, model)
    source = "<defaults>" if path is None else str(path)
    return Traced(parse_config(model, merged, source=source), origins)


@dataclass(frozen=True, slots=True)
class Section:
    """One top-level section of the effective config: its values, origins and a header."""

    name: str
    values: Mapping[str, Any]  # JSON-ready (model_dump(mode="json"))
    origins: Origins
    header: str = ""  # where the section as a whole came from


def effective_config_text(sections: Sequence[Section], preamble: Sequence[str] = ()) -> str:
    """The sections as YAML, each leaf commented with its origin (see the module docstring)."""
    lines = [f"# {line}" if line else "#" for line in preamble]
    for section in sections:
        header = f"  # {section.header}" if section.header else ""
        if not section.values:
            lines.append(f"{section.name}: {{}}{header}")
            continue
        lines.append(f"{section.name}:{header}")
        lines.extend(_mapping_lines(section.values, section.origins, (), 1))
    return "\n".join(lines) + "\n"


def _mapping_lines(
    values: Mapping[str, Any], origins: Origins, prefix: LeafPath, depth: int
) -> Iterator[str]:
    indent = "  " * depth
    for key, value in values.items():
        path = (*prefix, str(key))
        name = _scalar(str(key))
        if isinstance(value, Mapping) and value:
            yield f"{indent}{name}:"
            yield from _mapping_lines(value, origins, path, depth + 1)
        else:
            yield f"{indent}{name}: {_scalar(value)}  # {origins.of(path)}"


def _scalar(value: Any) -> str:
    """`value` as one line of YAML flow style."""
    if isinstance(value, float) and math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = yaml.safe_dump(value, default_flow_style=True, width=math.inf, sort_keys=False)
    text = text.strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    return text.removesuffix("...").strip()
