"""The base of every exception the project raises, and the one error every layer shares.

    ConductorError                 base of every error of this project (catch it at the CLI)
    └── ConfigError                a config file, override or value is invalid; the message
                                   names the field, the file and what to do

Each package hangs its own tree under `ConductorError` (`harness.errors.HarnessError`,
`rollout.errors.RolloutError`, `kvcache.errors.KVCacheError`), so a command can catch every
known failure with one clause and print its message instead of a traceback.
"""

from __future__ import annotations

__all__ = ["ConductorError", "ConfigError"]


class ConductorError(Exception):
    """Base class of every error raised by this project's packages."""


class ConfigError(ConductorError, ValueError):
    """A configuration file, override or value is invalid (the message says which and why)."""
