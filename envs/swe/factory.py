"""`SWEEnvFactory`: the SWE env factory a pool calls, picklable for pools in other processes.

A pool makes each episode's env with `factory(handle)`. In-process (`EnvPool`, `pool.hosts`)
any callable will do; a Ray env worker runs the env on its own node, so the factory is pickled
there and must not hold a Docker client or a temporary directory. This one holds only what
describes the env (the task, the env config, the sandbox settings); the sandboxes it grades in
come from `sandboxes_for(spec)`, one `BackendSandboxes` per process and setting — on a Ray node,
that node's own Docker engine, so a sample is graded where it ran.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from envs.swe.config import SWEEnvConfig
from envs.swe.env import SWEEnv
from envs.swe.images import TaskImageConfig
from envs.swe.runtime import BackendSandboxes, swe_backend
from envs.swe.tasks import SWETask
from harness.handle import SandboxHandle
from harness.sandbox.limits import ContainerLimits, ExecLimits
from harness.standalone import BackendName

__all__ = ["SWEEnvFactory", "SandboxSpec", "sandboxes_for"]


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """The settings a process needs to make SWE sandboxes: backend, task images, limits."""

    backend: BackendName
    images: TaskImageConfig
    workdir: str
    limits: ContainerLimits
    exec_limits: ExecLimits


_sandboxes: dict[SandboxSpec, BackendSandboxes] = {}
_lock = threading.Lock()


def sandboxes_for(
    spec: SandboxSpec, *, existing: BackendSandboxes | None = None
) -> BackendSandboxes:
    """This process's `BackendSandboxes` for `spec`, made on first use; `existing` registers
    one the caller already made (the run's own, so its built images are not checked again)."""
    with _lock:
        if existing is not None:
            _sandboxes[spec] = existing
            return existing
        sandboxes = _sandboxes.get(spec)
        if sandboxes is None:
            sandboxes = _sandboxes[spec] = swe_backend(
                spec.backend,
                spec.images,
                workdir=spec.workdir,
                limits=spec.limits,
                exec_limits=spec.exec_limits,
            )
        return sandboxes


@dataclass(frozen=True, slots=True)
class SWEEnvFactory:
    """Makes the SWE env of one task on a pool's sandbox handle (see the module docstring)."""

    task: SWETask
    config: SWEEnvConfig
    sandboxes: SandboxSpec

    def __call__(self, handle: SandboxHandle) -> SWEEnv:
        grading = sandboxes_for(self.sandboxes).grading_sandbox
        return SWEEnv(self.task, sandboxes=handle, grading_sandboxes=grading, config=self.config)
