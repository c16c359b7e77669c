"""The harness exception tree.

    HarnessError
    ├── ConfigError            a config file or value is invalid (the message names the field)
    ├── EnvNotFoundError       an env id is not registered (the message suggests the closest id)
    ├── SandboxError           a sandbox could not be created or used
    │   ├── SandboxDeadError   the container or process group is gone; the episode must end
    │   └── ImageNotFoundError the image is missing; build it with `conductor images build`
    └── PoolClosedError        the env pool was used after `aclose()`

Failures of *actions* are never exceptions: a hung command, a fork bomb or a bad tool call come
back as values (`ExecResult`, error observations). These exceptions are for the infrastructure.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EnvNotFoundError",
    "HarnessError",
    "ImageNotFoundError",
    "PoolClosedError",
    "SandboxDeadError",
    "SandboxError",
]


class HarnessError(Exception):
    """Base class of every error raised by `harness`."""


class ConfigError(HarnessError, ValueError):
    """A configuration file or value is invalid."""


class EnvNotFoundError(HarnessError, LookupError):
    """No env is registered under the requested id."""


class SandboxError(HarnessError):
    """A sandbox could not be created, reached or used."""


class SandboxDeadError(SandboxError):
    """The sandbox died (container removed, OOM-killed, daemon restarted)."""


class DockerUnavailableError(SandboxError):
    """The Docker daemon did not answer (connection refused or reset, restarting, timed out)."""


class ImageNotFoundError(SandboxError):
    """The requested image does not exist locally."""


class PoolClosedError(HarnessError, RuntimeError):
    """The env pool was used after it was closed."""
