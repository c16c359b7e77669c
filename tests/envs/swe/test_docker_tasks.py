"""The shipped task set graded in real Docker: gold patch -> 1, empty patch -> 0; cheats -> 0;
the SWE env through the warm env pool."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import docker
import pytest

from envs.swe.config import SWEEnvConfig
from envs.swe.env import SWEEnv
from envs.swe.grader import AgentPatch, Grader
from envs.swe.grading_log import parse_pytest_log
from envs.swe.images import TaskImageConfig, TaskImageResolver
from envs.swe.runtime import BackendSandboxes
from envs.swe.tasks import SWETask, load_shipped_tasks
from foundation.clock import LoopClock
from foundation.config import load_config
from harness.backends import DockerBackend
from harness.errors import SandboxError
from harness.handle import SandboxHandle
from harness.pool import EnvPool, PoolConfig
from harness.sandbox import ContainerLimits, ExecLimits
from tests.conftest import project_containers

pytestmark = pytest.mark.docker

TASKS = load_shipped_tasks()
ONE_PER_PROJECT = list({task.project: task for task in TASKS}.values())


def grader(runtime: BackendSandboxes) -> Grader:
    return Grader(
        SWEEnvConfig().grading,
        runtime.grading_sandbox,
        clock=LoopClock(),
        parse_log=parse_pytest_log,
    )


async def _grade(runtime: BackendSandboxes, task: SWETask, diff: str) -> tuple[float, object]:
    await runtime.ensure_image(task)
    report = await grader(runtime).grade(task, AgentPatch(diff=diff.encode()))
    return report.reward, report


def _ids(tasks: list[SWETask]) -> list[str]:
    return [task.instance_id.split("__")[-1] for task in tasks]


@pytest.mark.parametrize("task", ONE_PER_PROJECT, ids=_ids(ONE_PER_PROJECT))
async def test_gold_patch_resolves_a_sample_task(runtime: BackendSandboxes, task: SWETask) -> None:
    reward, report = await _grade(runtime, task, task.patch)
    assert reward == 1.0, report


@pytest.mark.parametrize("task", ONE_PER_PROJECT, ids=_ids(ONE_PER_PROJECT))
async def test_empty_patch_fails_a_sample_task(runtime: BackendSandboxes, task: SWETask) -> None:
    reward, report = await _grade(runtime, task, "")
    assert reward == 0.0 and report.infra_error is None, report  # type: ignore[attr-defined]


# Gradings of different tasks run side by side: each is mostly a container starting and a test
# run waiting on it, so a few at once take about half the time of one after another (2 cores).
GRADINGS_AT_ONCE = 3


@pytest.mark.slow
async def test_every_shipped_task_gold_is_1_and_empty_is_0(runtime: BackendSandboxes) -> None:
    for task in TASKS:  # one build per image, before any grading shares it
        await runtime.ensure_image(task)
    slots = asyncio.Semaphore(GRADINGS_AT_ONCE)

    async def wrong_rewards(task: SWETask) -> str | None:
        async with slots:
            gold, gold_report = await _grade(runtime, task, task.patch)
            empty, empty_report = await _grade(runtime, task, "")
        if (gold, empty) == (1.0, 0.0):
            return None
        return f"{task.instance_id}: gold {gold}, empty {empty}: {gold_report} / {empty_report}"

    wrong = [line for line in await asyncio.gather(*map(wrong_rewards, TASKS)) if line]
    assert not wrong, "\n".join(wrong)


async def test_task_image_has_exactly_one_commit_and_no_gold_fix(runtime: BackendSandboxes) -> None:
    task = ONE_PER_PROJECT[0]
    sandbox, release = await runtime.acquire(task)
    try:
        history = await sandbox.exec("git rev-list --all | wc -l; git reflog | wc -l", timeout_s=30)
        assert history.output.split() == ["1", "0"]
        head = await sandbox.exec("git rev-parse HEAD", timeout_s=30)
        assert head.output.strip() == task.base_commit
    finally:
        await release()


async def test_fake_passed_lines_from_a_conftest_do_not_earn_a_reward(
    runtime: BackendSandboxes,
) -> None:
    task = ONE_PER_PROJECT[0]
    cheat = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/conftest.py\n@@ -0,0 +1,4 @@\n+import os\n+def pytest_sessionfinish(session):\n"
        f"+    print('PASSED {task.FAIL_TO_PASS[0]}')\n+    os._exit(0)\n"
    )
    reward, _ = await _grade(runtime, task, cheat)
    assert reward == 0.0


async def test_swe_env_episode_through_the_warm_pool(
    runtime: BackendSandboxes, docker_client: docker.DockerClient
) -> None:
    task = ONE_PER_PROJECT[1]
    image = await runtime.ensure_image(task)
    config = load_config(SWEEnvConfig, None, ["tools.bash_timeout_s=2"])

    def factory(handle: SandboxHandle) -> SWEEnv:
        return SWEEnv(
            task, sandboxes=handle, grading_sandboxes=runtime.grading_sandbox, config=config
        )

    async with EnvPool(runtime.backend, PoolConfig(warm_per_image=1, max_live=4)) as pool:
        await pool.wait_warm(image)
        lease = await pool.acquire(factory, image, sample_id="s0", group_id="g0")
        assert lease.handle.ready
        await lease.areset()
        hung = await lease.astep("```bash\nsleep 600\n```")
        assert hung[4]["timed_out"]
        apply = (
            "```bash\ncat > /tmp/gold.patch <<'EOF_GOLD'\n"
            + task.patch
            + "EOF_GOLD\ngit apply /tmp/gold.patch\n```"
        )
        applied = await lease.astep(apply)
        assert applied[4]["exit_code"] == 0, applied[0]
        _, reward, terminated, _, info = await lease.astep(
            '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        )
        assert terminated and reward == 1.0, info
        await lease.release()
    assert project_containers(docker_client) == []


@pytest.fixture(scope="module")
def hardened_runtime(
    docker_client: docker.DockerClient, base_image: str
) -> Iterator[BackendSandboxes]:
    """Task images whose /testbed belongs to uid 1000, and containers that run as that user on a
    read-only root (`pool.container.user`, `read_only_root`)."""
    backend = DockerBackend(
        docker_client,
        limits=ContainerLimits(memory_mb=512, user="1000:1000", read_only_root=True),
        exec_limits=ExecLimits(kill_grace_s=1, host_grace_s=5),
    )
    resolver = TaskImageResolver(TaskImageConfig(agent_uid=1000), base_image)
    yield BackendSandboxes(backend, resolver)


async def test_a_task_runs_and_grades_as_a_non_root_user_on_a_read_only_root(
    hardened_runtime: BackendSandboxes, docker_client: docker.DockerClient
) -> None:
    task = ONE_PER_PROJECT[0]
    volumes_before = len(docker_client.volumes.list())
    assert (await _grade(hardened_runtime, task, task.patch))[0] == 1.0
    assert (await _grade(hardened_runtime, task, ""))[0] == 0.0
    sandbox, release = await hardened_runtime.acquire(task)
    try:
        who = await sandbox.exec("id -u; touch /usr/x 2>&1; touch mine && echo wrote", timeout_s=10)
        assert who.output.startswith("1000\n") and "wrote" in who.output, who.output
        assert "Read-only file system" in who.output or "Permission denied" in who.output
        with pytest.raises(SandboxError, match="permission denied"):
            await sandbox.write_file("/etc/profile", b"# not yours\n")
        with pytest.raises(SandboxError, match="permission denied"):
            await sandbox.read_file("/etc/shadow")
        await sandbox.write_file("/tmp/note.txt", b"scratch")
        assert await sandbox.read_file("/tmp/note.txt") == b"scratch"
    finally:
        await release()
    assert project_containers(docker_client) == []
    assert len(docker_client.volumes.list()) == volumes_before  # removed with their containers
