"""Turn a `Config` back into INI text."""

from __future__ import annotations

from inikit.config import DEFAULT_SECTION, Config

_INDENT = "    "


def _format_value(value: str) -> str:
    if "\n" in value:
        first, *rest = value.split("\n")
        return "\n".join([first, *(_INDENT + line for line in rest)])
    if value != value.strip() or " #" in value:
        return f'"{value}"'
    return value


def dumps(config: Config, *, separator: str = " = ") -> str:
    """Write ``config`` as INI text that `loads` reads back to an equal config.

    ``[DEFAULT]`` is written first and only if it has options; sections are
    separated by one blank line.
    """
    blocks = []
    for name, options in config.raw_sections().items():
        if name == DEFAULT_SECTION and not options:
            continue
        lines = [f"[{name}]"]
        lines.extend(f"{key}{separator}{_format_value(value)}" for key, value in options.items())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n" if blocks else ""
