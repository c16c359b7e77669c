"""`SWEEnvFactory`: the SWE env factory a pool calls, picklable for pools in other processes.

A pool makes each episode's env with `factory(handle)`. In-process (`EnvPool`, `pool.hosts`)
any callable will do; a Ray env worker runs the env on its own node, so the factory is pickled
there and must not hold a Docker client or a temporary directory. This one holds only what
describes the env (the task, its image, the env config, the sandbox settings). A sample is
graded where it ran: in a sibling of the agent's sandbox from the pool that made it (the same
Docker host or Ray node), or, for a handle without siblings, from `sandboxes_for(spec)` (one
`BackendSandboxes` per process and setting).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial

from envs.swe.config import SWEEnvConfig
from envs.swe.env import SWEEnv
from envs.swe.grader import GradingSandboxFactory
from envs.swe.grading import GradableTask
from envs.swe.images import TaskImageConfig
from envs.swe.runtime import BackendSandboxes, swe_backend
from envs.swe.tasks import SWETask
from harness.handle import PooledSandboxHandle, SandboxHandle
from harness.sandbox.base import Sandbox
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

    def build(self) -> BackendSandboxes:
        """New sandboxes with these settings (on the Docker engine this process reaches)."""
        return swe_backend(
            self.backend,
            self.images,
            workdir=self.workdir,
            limits=self.limits,
            exec_limits=self.exec_limits,
        )


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
            sandboxes = _sandboxes[spec] = spec.build()
        return sandboxes


@dataclass(frozen=True, slots=True)
class SWEEnvFactory:
    """Makes the SWE env of one task on a pool's sandbox handle (see the module docstring)."""

    task: SWETask
    config: SWEEnvConfig
    sandboxes: SandboxSpec
    image: str  # the task's image, which the pool starts the agent's sandbox from

    def __call__(self, handle: SandboxHandle) -> SWEEnv:
        grading: GradingSandboxFactory
        if isinstance(handle, PooledSandboxHandle) and handle.makes_siblings:
            grading = partial(_sibling_of, handle, self.image)  # beside the agent's sandbox
        else:
            grading = sandboxes_for(self.sandboxes).grading_sandbox
        return SWEEnv(self.task, sandboxes=handle, grading_sandboxes=grading, config=self.config)


async def _sibling_of(handle: PooledSandboxHandle, image: str, task: GradableTask) -> Sandbox:
    """The clean sandbox a task is graded in, from its image, where the agent's sandbox runs."""
    return await handle.sibling(image)
