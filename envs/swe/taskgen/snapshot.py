"""Build a task's repository at `base_commit`: one squashed commit with a reproducible id.

A shipped task names its project (the fixed code with every test) and carries two diffs:
`patch` (buggy -> fixed source) and `test_patch` (tests the agent must not see -> all tests).
The repository the agent starts from is therefore the project with both diffs reversed,
committed once by git with the fixed `SNAPSHOT_IDENTITY`; its commit id is known in advance
(`snapshot_commit`) and is the task's `base_commit`. `materialize_repo` is what image builders
call; it checks the id it gets against the task.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from envs.swe.taskgen.gitobjects import SNAPSHOT_IDENTITY, CommitIdentity, commit_id, tree_id
from envs.swe.taskgen.project_files import read_project, write_snapshot
from envs.swe.tasks import SHIPPED_TASKSET_DIR, SWETask, TaskSetError

__all__ = [
    "SnapshotError",
    "commit_snapshot",
    "git",
    "materialize_repo",
    "project_dir",
    "snapshot_commit",
    "snapshot_tree",
]

# Settings that make `git` behave the same on every machine (no user or system config).
_GIT_CONFIG = (
    "-c",
    "init.defaultBranch=main",
    "-c",
    "core.autocrlf=false",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.logAllRefUpdates=false",
)


class SnapshotError(TaskSetError):
    """A task's repository cannot be built, or does not come out at `base_commit`."""


def snapshot_tree(files: Mapping[str, str]) -> str:
    """The git tree id of a snapshot (path -> text)."""
    return tree_id({path: text.encode("utf-8") for path, text in files.items()})


def snapshot_commit(files: Mapping[str, str], identity: CommitIdentity = SNAPSHOT_IDENTITY) -> str:
    """The id `commit_snapshot` will give this snapshot (computed without git)."""
    return commit_id(snapshot_tree(files), identity)


def project_dir(task: SWETask, taskset_dir: str | Path = SHIPPED_TASKSET_DIR) -> Path:
    """The directory holding the fixed project of a shipped task."""
    if task.project is None:
        raise SnapshotError(
            f"task {task.instance_id} names no project snapshot; only tasks of an offline "
            "task set (with `project`) can be materialized this way"
        )
    return Path(taskset_dir) / "projects" / task.project


def git(
    repo: str | Path, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    """Run `git` in `repo` without user or system config; return stdout.

    Raises:
        SnapshotError: git failed (the message holds its stderr).
    """
    full_env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    full_env.update(env or {})
    try:
        completed = subprocess.run(
            ["git", *_GIT_CONFIG, *args],
            cwd=repo,
            input=stdin,
            capture_output=True,
            text=True,
            env=full_env,
            check=False,
        )
    except FileNotFoundError as exc:
        raise SnapshotError(
            "git is not installed; install it (Debian: apt-get install git)"
        ) from exc
    if completed.returncode != 0:
        raise SnapshotError(f"git {' '.join(args)} failed in {repo}: {completed.stderr.strip()}")
    return completed.stdout


def commit_snapshot(repo: str | Path, identity: CommitIdentity = SNAPSHOT_IDENTITY) -> str:
    """`git init` + add everything + one commit with `identity` in `repo`; return the commit id."""
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(
        repo,
        "commit",
        "-q",
        "--no-verify",
        "--cleanup=verbatim",
        "-F",
        "-",
        stdin=identity.message,
        env=identity.git_env(),
    )
    return git(repo, "rev-parse", "HEAD").strip()


def materialize_repo(
    task: SWETask,
    dest_dir: str | Path,
    *,
    taskset_dir: str | Path = SHIPPED_TASKSET_DIR,
    identity: CommitIdentity = SNAPSHOT_IDENTITY,
) -> str:
    """Write the task's repository at `base_commit` into `dest_dir` and return the commit id.

    The result has the buggy source, no F2P tests and exactly one commit (no remotes, tags or
    reflog). `dest_dir` is created if needed and must be empty.

    Raises:
        SnapshotError: the task has no project, the project changed since the task was
            generated, a diff does not reverse-apply, or the commit id is not `base_commit`.
    """
    source_dir = project_dir(task, taskset_dir)
    files = read_project(source_dir)
    if task.project_tree is not None and snapshot_tree(files) != task.project_tree:
        raise SnapshotError(
            f"{source_dir} changed since task {task.instance_id} was generated; regenerate the "
            "task set with `python -m envs.swe.taskgen generate`"
        )
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise SnapshotError(f"{dest} is not empty; materialize into an empty directory")
    write_snapshot(files, dest)
    git(dest, "init", "-q")
    for name, diff in (("test_patch", task.test_patch), ("patch", task.patch)):
        if diff:
            try:
                git(dest, "apply", "-R", "--whitespace=nowarn", "-", stdin=diff)
            except SnapshotError as exc:
                raise SnapshotError(
                    f"task {task.instance_id}: its {name} does not reverse-apply to {source_dir}: "
                    f"{exc}"
                ) from exc
    head = commit_snapshot(dest, identity)
    if head != task.base_commit:
        raise SnapshotError(
            f"task {task.instance_id}: the repository came out at {head}, not at base_commit "
            f"{task.base_commit}; regenerate the task set or check the git identity"
        )
    return head
