"""Put a task's repository at `base_commit` into a directory, whichever way the task names it.

* `project` (the shipped offline task set): the snapshot, via `taskgen.snapshot.materialize_repo`.
* `repo_path` (your own tasks, way 1): a local git repository or a git bundle that holds
  `base_commit`. The result is a *shallow* repository holding that one commit under its real
  id, with no parent and no other object: the fix, which lives in later commits, cannot be read
  back from the object store, and `git log` shows one commit. File modes, symlinks and binary
  files come out as git stored them.
* `image` (way 2): nothing to put anywhere, the image already holds the repository.

Why shallow and not a fresh squashed commit: a new commit would get a new id, and a SWE-bench
record's `base_commit` (used for the patch diff and for restoring test files) would no longer
name anything in the repository.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from envs.swe.taskgen.snapshot import SnapshotError, git, materialize_repo
from envs.swe.tasks import SWETask

__all__ = ["NO_REPOSITORY_HELP", "checkout_base_commit", "materialize_task_repo"]

NO_REPOSITORY_HELP = (
    "give it `repo_path` (a local git repository or bundle file holding base_commit), `image` "
    "(a prebuilt image whose /testbed holds the repository and its environment), or `project` "
    "(tasks of a shipped offline task set); see docs/swe.md, 'Bring your own tasks'"
)
_BASE_REF = "refs/conductor/base"


def materialize_task_repo(task: SWETask, dest_dir: str | Path) -> str:
    """Write the task's repository at `base_commit` into the empty `dest_dir`; return the id.

    Raises:
        SnapshotError: the task names no repository it can be built from here, or the
            repository does not hold `base_commit` (the message says what to do).
    """
    kind = task.source_kind
    if kind == "project":
        return materialize_repo(task, dest_dir)
    if kind == "repo_path":
        assert task.repo_path is not None
        return checkout_base_commit(Path(task.repo_path), task.base_commit, Path(dest_dir))
    if kind == "image":
        raise SnapshotError(
            f"task {task.instance_id} runs in its prebuilt image {task.image}; there is no "
            "repository to build (use the Docker backend)"
        )
    raise SnapshotError(f"task {task.instance_id} names no repository; {NO_REPOSITORY_HELP}")


def checkout_base_commit(source: Path, base_commit: str, dest: Path) -> str:
    """A shallow, single-commit repository at `base_commit` from a repository or bundle.

    Raises:
        SnapshotError: `source` is missing, is not a repository or bundle, or lacks the commit.
    """
    if not source.exists():
        raise SnapshotError(f"repo_path {source} does not exist")
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise SnapshotError(f"{dest} is not empty; materialize into an empty directory")
    with tempfile.TemporaryDirectory(prefix="conductor-repo-") as scratch:
        full = Path(scratch) / "full"
        try:
            git(scratch, "clone", "--quiet", "--no-checkout", str(source.resolve()), str(full))
        except SnapshotError as exc:
            raise SnapshotError(
                f"repo_path {source} is not a git repository or bundle git can clone: {exc}"
            ) from exc
        try:
            git(full, "cat-file", "-e", f"{base_commit}^{{commit}}")
        except SnapshotError as exc:
            raise SnapshotError(
                f"repo_path {source} does not hold base_commit {base_commit}; fetch it into "
                "that repository (or bundle it with that commit) and retry"
            ) from exc
        git(full, "update-ref", _BASE_REF, base_commit)
        git(dest, "init", "-q")
        git(dest, "fetch", "-q", "--depth=1", "--no-tags", full.as_uri(), _BASE_REF)
    git(dest, "update-ref", "refs/heads/main", base_commit)
    git(dest, "reset", "-q", "--hard")
    for leftover in ("FETCH_HEAD", "ORIG_HEAD"):
        (dest / ".git" / leftover).unlink(missing_ok=True)
    git(dest, "reflog", "expire", "--expire=now", "--all")
    head = git(dest, "rev-parse", "HEAD").strip()
    if head != base_commit:
        raise SnapshotError(f"{source}: checked out {head}, not base_commit {base_commit}")
    return head
