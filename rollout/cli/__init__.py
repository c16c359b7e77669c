"""The `conductor` command line. Each sub-command lives in its own module here."""

from rollout.cli.app import app, main

__all__ = ["app", "main"]
