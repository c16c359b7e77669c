"""Shared terminal output for the CLI: one rich console, and errors that say what to do."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["config_and_overrides", "console", "fail"]

console = Console(stderr=False, highlight=False)


def fail(message: str, *, exit_code: int = 1) -> NoReturn:
    """Print `message` in red and exit; the message should say what to do next."""
    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(exit_code)


_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*=")


def config_and_overrides(
    config: Path, overrides: list[str] | None, default: Path
) -> tuple[Path, list[str]]:
    """`conductor CMD key=value` means the default config with that override: a first
    argument that starts with a dotted key and `=` (`tasks_file=/data/x.jsonl`,
    `pool.act_slots=4`) and names no file is an override, not a config path."""
    rest = list(overrides or [])
    text = str(config)
    if config != default and _OVERRIDE_KEY.match(text) and not config.exists():
        return default, [text, *rest]
    return config, rest
