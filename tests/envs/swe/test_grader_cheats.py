"""The cheat corpus against the real grader in Docker: every cheat scores 0, as the agent's
fault, with a reason, on a user's own task (way 1 of docs/swe.md: a record plus a local
repository) and on a shipped task; a killed grading container is an infra error; the agent
cannot make its own failure look like infrastructure."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import docker
import pytest

from envs.swe.config import GradingConfig, SWEEnvConfig
from envs.swe.env import SWEEnv
from envs.swe.grader import AgentPatch, Grader
from envs.swe.grading import EpisodeTask, GradableTask
from envs.swe.grading_log import parse_pytest_log
from envs.swe.runtime import BackendSandboxes
from envs.swe.sandbox_source import ReleaseSandbox
from envs.swe.tasks import SWETask, load_shipped_tasks, load_tasks_strict
from foundation.clock import LoopClock
from harness.sandbox.base import Sandbox
from tests.conftest import project_containers
from tests.envs.swe.cheats import CHEATS, DEMO_PLUGIN_INSTALL, cheat_patch
from tests.envs.swe.own_repo import OwnRepo, make_own_repo

pytestmark = pytest.mark.docker

TASK = load_shipped_tasks()[0]
CONFIG = GradingConfig(test_timeout_s=8, kill_grace_s=1, host_margin_s=20)


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> OwnRepo:
    return make_own_repo(tmp_path_factory.mktemp("own"))


@pytest.fixture(scope="module")
def own_task(own: OwnRepo, tmp_path_factory: pytest.TempPathFactory) -> SWETask:
    """A user's own task, way 1: a SWE-bench record plus a local repository (bundle)."""
    tasks_file = own.write_tasks(
        Path(tmp_path_factory.mktemp("tasks")) / "tasks.jsonl", repo_path=str(own.bundle)
    )
    (task,) = load_tasks_strict(tasks_file)
    return task


@pytest.fixture(params=["own", "shipped"])
def task(request: pytest.FixtureRequest) -> SWETask:
    if request.param == "own":
        return request.getfixturevalue("own_task")  # type: ignore[no-any-return]
    return TASK


def make_grader(runtime: BackendSandboxes, config: GradingConfig = CONFIG) -> Grader:
    return Grader(config, runtime.grading_sandbox, clock=LoopClock(), parse_log=parse_pytest_log)


async def test_the_gold_patch_still_scores_1_through_the_hardened_grader(
    runtime: BackendSandboxes, task: SWETask
) -> None:
    await runtime.ensure_image(task)
    report = await make_grader(runtime).grade(task, AgentPatch(task.patch.encode()))
    assert report.resolved and report.hardened and not report.tampered, report.to_dict()


@pytest.mark.parametrize("name", sorted(CHEATS))
async def test_a_cheating_patch_scores_0_with_a_reason_as_the_agents_fault(
    runtime: BackendSandboxes, task: SWETask, name: str
) -> None:
    await runtime.ensure_image(task)
    patch = cheat_patch(task, CHEATS[name])
    report = await make_grader(runtime).grade(
        task, AgentPatch(patch.encode("utf-8", "surrogateescape"))
    )
    details = report.to_dict()
    assert report.reward == 0.0, details
    assert report.infra_error is None and report.fault == "agent", details
    reason = report.invalid_reason or report.f2p_failed or report.p2p_failed
    assert reason, details


async def test_a_module_shadowing_an_installed_plugin_scores_0(
    runtime: BackendSandboxes, own: OwnRepo, tmp_path: Path
) -> None:
    """A user's task whose image installs a pytest plugin: a root module named like the
    plugin's entry point must not be what pytest loads."""
    tasks_file = own.write_tasks(
        tmp_path / "tasks.jsonl", repo_path=str(own.bundle), install_cmd=DEMO_PLUGIN_INSTALL
    )
    (task,) = load_tasks_strict(tasks_file)
    await runtime.ensure_image(task)
    gold = await make_grader(runtime).grade(task, AgentPatch(task.patch.encode()))
    assert gold.resolved and "demo plugin" in gold.log_tail, gold.to_dict()
    patch = cheat_patch(task, CHEATS["shadow_installed_plugin"]).encode()
    report = await make_grader(runtime).grade(task, AgentPatch(patch))
    assert report.reward == 0.0 and report.fault == "agent", report.to_dict()


@pytest.mark.parametrize(
    "name",
    ["selective_pass_forcing", "setup_cfg_cr_only_plugin", "pyproject_symlink_plugin",
     "stdlib_shadow_pdb"],
)  # fmt: skip
async def test_the_round_three_cheats_score_0_through_the_env_too(
    runtime: BackendSandboxes, own_task: SWETask, name: str
) -> None:
    """The agent's way in: it writes the cheat in its sandbox with bash and submits; the env
    extracts the patch itself and grades it."""
    await runtime.ensure_image(own_task)

    async def agent_sandbox(task: EpisodeTask) -> tuple[Sandbox, ReleaseSandbox]:
        return await runtime.acquire(own_task)

    env = SWEEnv(
        own_task, sandboxes=agent_sandbox, grading_sandboxes=runtime.grading_sandbox,
        config=SWEEnvConfig(grading=CONFIG),
    )  # fmt: skip
    try:
        await env.areset()
        patch = cheat_patch(own_task, CHEATS[name]).encode("utf-8", "surrogateescape")
        encoded = base64.b64encode(patch).decode()
        command = f"echo {encoded} | base64 -d > /tmp/cheat.patch && git apply /tmp/cheat.patch"
        observation, *_ = await env.astep(f"```bash\n{command} && echo APPLIED\n```")
        assert "APPLIED" in str(observation), observation
        _, reward, terminated, _, info = await env.astep(
            '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        )
    finally:
        await env.aclose()
    grading = info["grading"]
    assert terminated and reward == 0.0 and grading["fault"] == "agent", grading
    assert grading["invalid_reason"] or grading["f2p_failed"], grading


@pytest.mark.parametrize(
    "name", ["setup_cfg_cr_only_plugin", "pyproject_symlink_plugin", "setup_cfg_form_feed_plugin"]
)
async def test_pytest_reads_only_the_pristine_configuration_even_without_the_refusal(
    runtime: BackendSandboxes, task: SWETask, name: str
) -> None:
    """Each defence holds alone: with the refusal of odd config files off, pytest still reads
    only the grader's pristine copy, so the selective plugin never loads."""
    await runtime.ensure_image(task)
    no_refusal = CONFIG.model_copy(update={"config_file_patterns": ()})
    patch = cheat_patch(task, CHEATS[name]).encode()
    report = await make_grader(runtime, no_refusal).grade(task, AgentPatch(patch))
    assert report.reward == 0.0 and report.pristine_config, report.to_dict()
    assert report.f2p_failed and not report.tampered, report.to_dict()


async def test_the_canaries_alone_catch_selective_pass_forcing(
    runtime: BackendSandboxes, task: SWETask
) -> None:
    await runtime.ensure_image(task)
    patch = cheat_patch(task, CHEATS["selective_pass_forcing"]).encode()
    single = CONFIG.model_copy(update={"second_verdict": False})
    report = await make_grader(runtime, single).grade(task, AgentPatch(patch))
    assert report.reward == 0.0 and report.tampered, report.to_dict()
    assert report.invalid_reason == "tampered: the canary test that must fail did not fail"


async def test_the_second_verdict_alone_catches_what_the_first_run_missed(
    runtime: BackendSandboxes,
) -> None:
    """With the launcher off, a pdb.py at the root forces the selective passes and the first
    run resolves; the second verdict, without the root module, does not: reward 0."""
    await runtime.ensure_image(TASK)
    patch = cheat_patch(TASK, CHEATS["stdlib_shadow_pdb"]).encode()
    plain = CONFIG.model_copy(update={"harden_pytest": False})
    fooled = await make_grader(runtime, plain.model_copy(update={"second_verdict": False})).grade(
        TASK, AgentPatch(patch)
    )
    assert fooled.reward == 1.0, fooled.to_dict()  # the test can fail
    report = await make_grader(runtime, plain).grade(TASK, AgentPatch(patch))
    assert report.reward == 0.0 and report.fault == "agent", report.to_dict()
    assert report.invalid_reason and report.invalid_reason.startswith("verdicts_disagree")
    assert "pdb.py" in (report.second_verdict or {}).get("dropped_paths", []), report.to_dict()


async def test_a_cheat_that_shadows_pytest_fools_the_unhardened_grader(
    runtime: BackendSandboxes,
) -> None:
    """The corpus can fail: with the launcher off, the shadowed runner earns a 1 (the
    regression this test guards against is the hardening being switched off by default)."""
    await runtime.ensure_image(TASK)
    patch = cheat_patch(TASK, CHEATS["shadow_pytest_module"]).encode()
    unhardened = CONFIG.model_copy(update={"harden_pytest": False})
    report = await make_grader(runtime, unhardened).grade(TASK, AgentPatch(patch))
    assert report.reward == 1.0 and not report.hardened
    assert GradingConfig().harden_pytest


class _KilledDuringTests:
    """A grading sandbox whose container is killed while the test command runs."""

    def __init__(self, inner: Sandbox, client: docker.DockerClient) -> None:
        self._inner = inner
        self._client = client

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def exec(self, cmd: str, **kwargs: object) -> object:
        if "launch_pytest.py" not in cmd:
            return await self._inner.exec(cmd, **kwargs)  # type: ignore[arg-type]
        running = asyncio.ensure_future(self._inner.exec(cmd, **kwargs))  # type: ignore[arg-type]
        await asyncio.sleep(1.0)
        container_id = self._inner._container.id  # type: ignore[attr-defined]
        await asyncio.to_thread(self._client.containers.get(container_id).kill)
        return await running


async def test_a_grading_container_killed_mid_run_is_an_infra_error(
    runtime: BackendSandboxes, docker_client: docker.DockerClient
) -> None:
    await runtime.ensure_image(TASK)

    async def killed_factory(task: GradableTask) -> Sandbox:
        inner = await runtime.grading_sandbox(task)
        return _KilledDuringTests(inner, docker_client)  # type: ignore[return-value]

    slow_gold = TASK.patch + cheat_patch(TASK, _sleep_at_import)
    grader = Grader(CONFIG, killed_factory, clock=LoopClock(), parse_log=parse_pytest_log)
    report = await grader.grade(TASK, AgentPatch(slow_gold.encode()))
    assert report.infra_error is not None and report.fault == "infra", report.to_dict()
    assert project_containers(docker_client) == []


def _sleep_at_import(repo, task) -> None:  # type: ignore[no-untyped-def]
    (repo / "slow_marker.py").write_text("")
    init = next(p for p in sorted(repo.iterdir()) if (p / "__init__.py").is_file()) / "__init__.py"
    init.write_text(init.read_text() + "\nimport time\ntime.sleep(6)\n")


async def test_a_huge_sparse_file_is_the_agents_zero_not_an_infra_error(
    runtime: BackendSandboxes,
) -> None:
    sandbox, release = await runtime.acquire(TASK)
    try:
        # 1 TB no longer fits under the file-size ulimit; 2000 MiB sparse still would stall git
        made = await sandbox.exec("truncate -s 2000M big.bin && ls -l big.bin", timeout_s=30)
        assert made.exit_code == 0, made.output
        grader = make_grader(runtime)
        patch = await grader.extract_patch(sandbox, TASK)
        assert (
            isinstance(patch, AgentPatch) and patch.too_large and "big.bin" in patch.changed_paths
        )
        report = await grader.grade(TASK, patch)
        assert report.reward == 0.0 and report.fault == "agent"
        assert report.invalid_reason == "patch_too_large"
    finally:
        await release()


async def test_build_artefacts_are_left_out_of_the_extracted_patch(
    runtime: BackendSandboxes,
) -> None:
    sandbox, release = await runtime.acquire(TASK)
    try:
        ran = await sandbox.exec(
            f"{TASK.test_command} >/dev/null; ls -d */__pycache__", timeout_s=120
        )
        assert "__pycache__" in ran.output, ran.output
        await sandbox.exec("mkdir -p x.egg-info && echo meta > x.egg-info/PKG-INFO", timeout_s=30)
        await sandbox.exec(
            "printf '\\x00\\x01binary' > data.bin && chmod 755 data.bin", timeout_s=30
        )
        patch = await make_grader(runtime).extract_patch(sandbox, TASK)
        assert isinstance(patch, AgentPatch), patch
        assert not [
            path for path in patch.changed_paths if "__pycache__" in path or ".egg-info" in path
        ]
        assert "data.bin" in patch.changed_paths
        assert b"GIT binary patch" in patch.diff and b"new file mode 100755" in patch.diff
    finally:
        await release()


async def test_a_broken_repository_is_the_agents_zero_not_an_infra_error(
    runtime: BackendSandboxes,
) -> None:
    sandbox, release = await runtime.acquire(TASK)
    try:
        await sandbox.exec("rm -rf .git/objects", timeout_s=30)
        patch = await make_grader(runtime).extract_patch(sandbox, TASK)
        assert isinstance(patch, AgentPatch) and patch.error is not None, patch
        report = await make_grader(runtime).grade(TASK, patch)
        assert report.reward == 0.0 and report.fault == "agent"
        assert report.invalid_reason and "patch_extraction_failed" in report.invalid_reason
    finally:
        await release()
