"""`SWEEnvFactory`: it pickles (Ray workers get it), and a pooled env is graded beside its
agent's sandbox, on the same backend."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from envs.swe.config import SWEEnvConfig
from envs.swe.factory import SandboxSpec, SWEEnvFactory, sandboxes_for
from envs.swe.images import TaskImageConfig
from envs.swe.runtime import BackendSandboxes
from envs.swe.tasks import SWETask
from harness.backends import LocalBackend
from harness.pool import EnvPool, PoolConfig
from harness.sandbox import ContainerLimits, ExecLimits, Sandbox

SPEC = SandboxSpec("local", TaskImageConfig(), "/testbed", ContainerLimits(), ExecLimits())


def _call(name: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


class _CountingBackend(LocalBackend):
    def __init__(self) -> None:
        super().__init__()
        self.created: list[str] = []

    async def create(self, image: str) -> Sandbox:
        self.created.append(image)
        return await super().create(image)


def test_the_factory_pickles_to_an_equal_one(tiny_template: tuple[Path, SWETask, str]) -> None:
    factory = SWEEnvFactory(tiny_template[1], SWEEnvConfig(), SPEC, "tiny")
    assert pickle.loads(pickle.dumps(factory)) == factory


def test_one_process_has_one_set_of_sandboxes_per_spec() -> None:
    mine = BackendSandboxes(LocalBackend(), sandboxes_for(SPEC).resolver)
    assert sandboxes_for(SPEC, existing=mine) is mine and sandboxes_for(SPEC) is mine


async def test_a_pooled_env_is_graded_in_a_sibling_of_its_agents_sandbox(
    tiny_template: tuple[Path, SWETask, str],
) -> None:
    template, task, gold_patch = tiny_template
    backend = _CountingBackend()
    backend.add_image("tiny", template)
    factory = SWEEnvFactory(task, SWEEnvConfig(), SPEC, "tiny")
    async with EnvPool(backend, PoolConfig(backend="local", warm_per_image=0)) as pool:
        lease = await pool.acquire(factory, "tiny")
        await lease.areset(seed=0)
        await lease.astep(_call("bash", command=f"git apply <<'EOF_PATCH'\n{gold_patch}EOF_PATCH"))
        _, reward, terminated, _, info = await lease.astep(_call("submit"))
        await lease.release()
    assert (reward, terminated, info["infra_error"]) == (1.0, True, None)
    # the agent's sandbox, then its grading siblings (the first verdict and the second)
    assert backend.created == ["tiny", "tiny", "tiny"]
