"""The agentic environment harness: text envs, Docker sandboxes, a warm env pool, step events.

Public API (see README "Plug in a new env"):

* `AgentEnv` — base class of text-in/text-out envs (async core, Gymnasium sync API).
* `EnvPool`, `EnvLease`, `PoolConfig` — warm sandboxes per image, leases, act slots.
* `DockerBackend`, `LocalBackend` — where sandboxes come from.
* `StepEvent`, `Phase`, `EventBus` — action-level step events.
* `register_envs` — registers the shipped envs with Gymnasium (`conductor/<Name>-v0`).
* `standalone_handle`, `make_backend` — a sandbox for an env used without a pool.
* `docker_client`, `ensure_base_image` — the local Docker engine and the offline base image.
"""

from foundation.clock import Clock, LoopClock, ManualClock, MonotonicClock
from harness.backends import DockerBackend, LocalBackend, SandboxBackend
from harness.env import AgentEnv
from harness.errors import (
    ConfigError,
    DockerGoneError,
    DockerUnavailableError,
    EnvNotFoundError,
    HarnessError,
    ImageNotFoundError,
    PoolClosedError,
    SandboxDeadError,
    SandboxError,
)
from harness.events import EventBus, EventRecorder, Phase, StepEvent
from harness.handle import OwnedSandboxHandle, PooledSandboxHandle, SandboxHandle
from harness.images import ensure_base_image
from harness.pool import EnvFactory, EnvLease, EnvPool, PoolConfig, PoolStats
from harness.registration import make_env, register_envs
from harness.sandbox.docker import docker_client
from harness.spaces import UnicodeText
from harness.standalone import make_backend, standalone_handle

__all__ = [
    "AgentEnv",
    "Clock",
    "ConfigError",
    "DockerBackend",
    "DockerGoneError",
    "DockerUnavailableError",
    "EnvFactory",
    "EnvLease",
    "EnvNotFoundError",
    "EnvPool",
    "EventBus",
    "EventRecorder",
    "HarnessError",
    "ImageNotFoundError",
    "LocalBackend",
    "LoopClock",
    "ManualClock",
    "MonotonicClock",
    "OwnedSandboxHandle",
    "Phase",
    "PoolClosedError",
    "PoolConfig",
    "PoolStats",
    "PooledSandboxHandle",
    "SandboxBackend",
    "SandboxDeadError",
    "SandboxError",
    "SandboxHandle",
    "StepEvent",
    "UnicodeText",
    "docker_client",
    "ensure_base_image",
    "make_backend",
    "make_env",
    "register_envs",
    "standalone_handle",
]
