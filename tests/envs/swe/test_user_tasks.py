"""Bring your own tasks, in real Docker: a SWE-bench record plus (1) a local git repository or
bundle, or (2) a prebuilt image; gold -> 1, empty -> 0, the real base commit in /testbed, no
fix recoverable from git, file modes and binary files intact."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from envs.swe.config import GradingConfig
from envs.swe.grader import AgentPatch, Grader
from envs.swe.grading_log import parse_pytest_log
from envs.swe.images import TaskImageConfig, TaskImageResolver
from envs.swe.repo_source import checkout_base_commit
from envs.swe.runtime import BackendSandboxes
from envs.swe.tasks import SWETask, load_tasks, load_tasks_strict
from foundation.clock import LoopClock
from tests.envs.swe.own_repo import BINARY, OwnRepo, make_own_repo

pytestmark = pytest.mark.docker

PREBUILT_IMAGE = "aio-conductor/test-prebuilt-mylib:1"
ACTIVATE = "export PATH=/opt/venv/bin:$PATH\n"
PYTEST_SCRIPT = (
    "#!/usr/bin/env python3\nimport sys\nimport pytest\nsys.exit(pytest.console_main())\n"
)


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> OwnRepo:
    return make_own_repo(tmp_path_factory.mktemp("own"))


async def _grade(runtime: BackendSandboxes, task: SWETask, diff: str) -> tuple[float, dict]:
    grader = Grader(
        GradingConfig(), runtime.grading_sandbox, clock=LoopClock(), parse_log=parse_pytest_log
    )
    report = await grader.grade(task, AgentPatch(diff.encode()))
    return report.reward, report.to_dict()


async def _check_repository(runtime: BackendSandboxes, task: SWETask, own: OwnRepo) -> None:
    sandbox, release = await runtime.acquire(task)
    try:
        checks = {
            "head": "git rev-parse HEAD",
            "commits": "git rev-list --all | wc -l",
            "fix_commit": f"git cat-file -e {own.fix_commit} 2>/dev/null && echo yes || echo no",
            "fixed_blob": f"git cat-file -e {own.fixed_blob} 2>/dev/null && echo yes || echo no",
            "script": "./run.sh",
            "binary": "sha256sum data.bin | cut -d' ' -f1",
            "clean": "git status --porcelain | wc -l",
        }
        seen = {
            name: (await sandbox.exec(cmd, timeout_s=30)).output.strip()
            for name, cmd in checks.items()
        }
    finally:
        await release()
    assert seen == {
        "head": own.base_commit,
        "commits": "1",
        "fix_commit": "no",
        "fixed_blob": "no",
        "script": "script-ran",
        "binary": hashlib.sha256(BINARY).hexdigest(),
        "clean": "0",
    }


@pytest.mark.parametrize("source", ["repository", "bundle"])
async def test_way_1_a_record_plus_a_local_repository_or_bundle(
    runtime: BackendSandboxes, own: OwnRepo, tmp_path: Path, source: str
) -> None:
    repo_path = own.path if source == "repository" else own.bundle
    tasks_file = own.write_tasks(tmp_path / "tasks.jsonl", repo_path=str(repo_path))
    (task,) = load_tasks_strict(tasks_file)
    await runtime.ensure_image(task)
    await _check_repository(runtime, task, own)
    gold, gold_report = await _grade(runtime, task, task.patch)
    empty, empty_report = await _grade(runtime, task, "")
    assert gold == 1.0 and gold_report["hardened"], gold_report
    assert empty == 0.0 and empty_report["fault"] == "agent", empty_report


@pytest.fixture(scope="module")
def prebuilt_image(
    docker_client: docker.DockerClient,
    base_image: str,
    own: OwnRepo,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """An image shaped like SWE-bench's: /testbed holds the repo, and `pytest` is on PATH only
    once its environment is activated."""
    repo = tmp_path_factory.mktemp("prebuilt") / "repo"
    checkout_base_commit(own.path, own.base_commit, repo)
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        tar.add(repo, arcname="repo")
        for name, text in {
            "activate": ACTIVATE,
            "pytest": PYTEST_SCRIPT,
            "Dockerfile": (
                f"FROM {base_image}\nCOPY repo /testbed\nCOPY activate /opt/venv/bin/activate\n"
                "COPY pytest /opt/venv/bin/pytest\nRUN chmod 755 /opt/venv/bin/pytest && "
                "rm /usr/bin/pytest /usr/bin/py.test*\nWORKDIR /testbed\n"
            ),
        }.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    context.seek(0)
    docker_client.images.build(
        fileobj=context, custom_context=True, tag=PREBUILT_IMAGE, rm=True, network_mode="none"
    )
    yield PREBUILT_IMAGE
    docker_client.images.remove(PREBUILT_IMAGE, force=True)


async def test_way_2_a_record_plus_a_prebuilt_image_with_its_environment(
    runtime: BackendSandboxes, own: OwnRepo, tmp_path: Path, prebuilt_image: str
) -> None:
    tasks_file = own.write_tasks(
        tmp_path / "tasks.jsonl",
        image=prebuilt_image,
        test_cmd="pytest -rA",
        test_env_setup="source /opt/venv/bin/activate",
    )
    (task,) = load_tasks_strict(tasks_file)
    assert await runtime.ensure_image(task) == prebuilt_image  # used as is, never built
    await _check_repository(runtime, task, own)
    gold, gold_report = await _grade(runtime, task, task.patch)
    empty, _ = await _grade(runtime, task, "")
    assert (gold, empty) == (1.0, 0.0), gold_report
    assert gold_report["hardened"] and not gold_report["tampered"]
    without_env = task.model_copy(update={"test_env_setup": ""})
    unactivated, _ = await _grade(runtime, without_env, task.patch)
    assert unactivated == 0.0  # without the activation there is no pytest to run


async def test_a_missing_prebuilt_image_says_to_pull_it(
    runtime: BackendSandboxes, own: OwnRepo, tmp_path: Path
) -> None:
    tasks_file = own.write_tasks(tmp_path / "t.jsonl", image="aio-conductor/not-here:0")
    (task,) = load_tasks_strict(tasks_file)
    with pytest.raises(Exception, match="docker pull aio-conductor/not-here:0"):
        await runtime.ensure_image(task)


def test_a_repository_without_the_base_commit_is_a_clear_error(
    own: OwnRepo, tmp_path: Path
) -> None:
    tasks_file = own.write_tasks(
        tmp_path / "t.jsonl", repo_path=str(own.path), base_commit="0" * 40
    )
    (task,) = load_tasks_strict(tasks_file)
    with pytest.raises(ValueError, match=r"does not hold base_commit 0{40}; fetch it"):
        checkout_base_commit(Path(task.repo_path or ""), task.base_commit, tmp_path / "out")


def test_a_relative_repo_path_is_taken_from_the_task_files_directory(
    own: OwnRepo, tmp_path: Path
) -> None:
    link = tmp_path / "checkouts"
    link.mkdir()
    (link / "mylib").symlink_to(own.path)
    tasks_file = own.write_tasks(tmp_path / "tasks.jsonl", repo_path="checkouts/mylib")
    (task,) = load_tasks_strict(tasks_file)
    assert task.repo_path == str(tmp_path / "checkouts" / "mylib")


def test_a_record_naming_two_repository_sources_is_rejected(own: OwnRepo, tmp_path: Path) -> None:
    tasks_file = own.write_tasks(tmp_path / "t.jsonl", repo_path="x", image="y:1")
    result = load_tasks(tasks_file)
    assert not result.tasks and "not repo_path and image" in str(result.errors[0])


def test_a_project_path_cannot_leave_the_task_set(own: OwnRepo, tmp_path: Path) -> None:
    for bad in ("/root", "../../etc", "a/b"):
        result = load_tasks(own.write_tasks(tmp_path / "t.jsonl", project=bad))
        assert not result.tasks and result.errors[0].field == "project", bad


def test_a_plain_swe_bench_record_without_a_repository_says_what_to_do(
    own: OwnRepo, tmp_path: Path
) -> None:
    from envs.swe.repo_source import materialize_task_repo

    (task,) = load_tasks_strict(own.write_tasks(tmp_path / "t.jsonl"))
    with pytest.raises(ValueError, match=r"give it `repo_path`.*docs/swe\.md"):
        materialize_task_repo(task, tmp_path / "out")


def test_images_build_takes_a_users_task_file(
    own: OwnRepo, tmp_path: Path, docker_client: docker.DockerClient, base_image: str
) -> None:
    from typer.testing import CliRunner

    from rollout.cli.app import app

    tasks_file = own.write_tasks(tmp_path / "tasks.jsonl", repo_path=str(own.bundle))
    done = CliRunner().invoke(app, ["images", "build", "--tasks", str(tasks_file)])
    assert done.exit_code == 0, done.output
    assert "1 built" in done.output or "1 up to date" in done.output
    broken = own.write_tasks(
        tmp_path / "broken.jsonl", repo_path=str(own.bundle), base_commit="1" * 40
    )
    done = CliRunner().invoke(app, ["images", "build", "--tasks", str(broken)])
    # (the message names a temporary path, so it wraps wherever that path's length puts it)
    unwrapped = " ".join(done.output.split())
    assert done.exit_code == 1 and "does not hold base_commit" in unwrapped, done.output


def test_a_failed_task_image_build_leaves_no_dangling_image(
    own: OwnRepo, tmp_path: Path, docker_client: docker.DockerClient, base_image: str
) -> None:
    from envs.swe.images import build_task_image
    from harness.errors import SandboxError

    def dangling() -> set[str]:
        return {image.id for image in docker_client.images.list(filters={"dangling": True})}

    before = dangling()
    tasks_file = own.write_tasks(
        tmp_path / "t.jsonl", repo_path=str(own.bundle), install_cmd="echo installing && false"
    )
    (task,) = load_tasks_strict(tasks_file)
    resolver = TaskImageResolver(TaskImageConfig(), base_image)
    with pytest.raises(SandboxError, match="failed"):
        build_task_image(docker_client, task, resolver)
    assert dangling() <= before
