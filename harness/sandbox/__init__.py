"""Sandboxes: where an agent's actions run (Docker containers, or local directories).

`DockerSandbox` and `docker_client` are loaded on first use, so importing `harness.sandbox`
needs neither the Docker SDK's import time nor a running engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from harness.sandbox.base import ExecResult, OutputCap, OutputWindow, Sandbox, cap_output
from harness.sandbox.limits import ContainerLimits, ExecLimits
from harness.sandbox.local import LocalSandbox

if TYPE_CHECKING:
    from harness.sandbox.docker import DockerSandbox, docker_client

__all__ = [
    "ContainerLimits",
    "DockerSandbox",
    "ExecLimits",
    "ExecResult",
    "LocalSandbox",
    "OutputCap",
    "OutputWindow",
    "Sandbox",
    "cap_output",
    "docker_client",
]

_LAZY = {"DockerSandbox": "harness.sandbox.docker", "docker_client": "harness.sandbox.docker"}


def __getattr__(name: str) -> object:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module 'harness.sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(__all__)
