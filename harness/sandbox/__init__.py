"""Sandboxes: where an agent's actions run (Docker containers, or local directories)."""

from harness.sandbox.base import ExecResult, OutputCap, OutputWindow, Sandbox, cap_output
from harness.sandbox.limits import ContainerLimits, ExecLimits
from harness.sandbox.local import LocalSandbox

__all__ = [
    "ContainerLimits",
    "ExecLimits",
    "ExecResult",
    "LocalSandbox",
    "OutputCap",
    "OutputWindow",
    "Sandbox",
    "cap_output",
]
