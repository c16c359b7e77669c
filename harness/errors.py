"""The harness exception tree.

    foundation.errors.ConductorError
    └── HarnessError
        ├── EnvNotFoundError       an env id is not registered (the message suggests the closest id)
        ├── SandboxError           a sandbox could not be created or used
        │   ├── SandboxDeadError   the container or process group is gone; the episode must end
        │   ├── FileTooLargeError  a file is over a reader's size limit (`read_file(max_bytes)`)
        │   ├── DockerUnavailableError  the daemon did not answer (restarting, down)
        │   │   └── DockerGoneError     it stayed away past `pool.daemon_outage_s`: the run ends
        │   │       └── WorkerGoneError a Ray env worker (actor or node) died: member down
        │   └── ImageNotFoundError the image is missing; build it with `conductor images build`
        └── PoolClosedError        the env pool was used after `aclose()`

`ConfigError` (a bad config file or value) is `foundation.errors.ConfigError`, re-exported here;
it is not a `HarnessError`: every package raises it.

Failures of *actions* are never exceptions: a hung command, a fork bomb or a bad tool call come
back as values (`ExecResult`, error observations). These exceptions are for the infrastructure.
"""

from __future__ import annotations

from foundation.errors import ConductorError, ConfigError

__all__ = [
    "ConfigError",
    "DockerGoneError",
    "DockerUnavailableError",
    "EnvNotFoundError",
    "FileTooLargeError",
    "HarnessError",
    "ImageNotFoundError",
    "PoolClosedError",
    "SandboxDeadError",
    "SandboxError",
    "WorkerGoneError",
]


class HarnessError(ConductorError):
    """Base class of every error raised by `harness`."""


class EnvNotFoundError(HarnessError, LookupError):
    """No env is registered under the requested id."""


class SandboxError(HarnessError):
    """A sandbox could not be created, reached or used."""


class SandboxDeadError(SandboxError):
    """The sandbox died (container removed, OOM-killed, daemon restarted)."""


class FileTooLargeError(SandboxError):
    """A file is larger than the reader's bound (`Sandbox.read_file(max_bytes=...)`); nothing
    of it was read."""

    def __init__(self, path: str, size_bytes: int, max_bytes: int) -> None:
        super().__init__(f"{path} is {size_bytes} bytes, over the limit of {max_bytes} bytes")
        self.path = path
        self.size_bytes = size_bytes
        self.max_bytes = max_bytes


class DockerUnavailableError(SandboxError):
    """The Docker daemon did not answer (connection refused or reset, restarting, timed out)."""


class DockerGoneError(DockerUnavailableError):
    """The Docker daemon stayed away longer than the pool waits (`pool.daemon_outage_s`).

    Unlike its parent this is not one episode's bad luck: no episode can run, so a rollout ends
    the run with it instead of retrying samples that cannot start.
    """


class WorkerGoneError(DockerGoneError):
    """A Ray env worker died (its actor was killed or crashed, or its node went away).

    Like its parent it is final for that member: a `PoolFleet` marks the member down and places
    new leases elsewhere, and only when every member is down does the run end. The episodes that
    were running there end with an infra error (retried, never graded).
    """


class ImageNotFoundError(SandboxError):
    """The requested image does not exist locally."""


class PoolClosedError(HarnessError, RuntimeError):
    """The env pool was used after it was closed."""
