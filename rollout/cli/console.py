"""Shared terminal output for the CLI: one rich console, and errors that say what to do."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

__all__ = ["console", "fail"]

console = Console(stderr=False, highlight=False)


def fail(message: str, *, exit_code: int = 1) -> NoReturn:
    """Print `message` in red and exit; the message should say what to do next."""
    Console(stderr=True).print(f"[bold red]error:[/] {message}")
    raise typer.Exit(exit_code)
