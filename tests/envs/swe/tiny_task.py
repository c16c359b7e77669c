"""A tiny SWE task made by hand (a calculator with a bug), and local sandboxes that hold it.

`build_tiny_task(dir)` writes a git repo with one commit (the buggy snapshot) and returns the
`SWETask` plus its gold patch; `TinyTaskBed` copies the repo into fresh `LocalSandbox`es for
the agent and for grading, and records what it lent and got back.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from envs.swe.sandbox_source import ReleaseSandbox
from envs.swe.tasks import SWETask
from harness.sandbox.base import Sandbox
from harness.sandbox.limits import ExecLimits
from harness.sandbox.local import LocalSandbox

__all__ = ["FAST_LIMITS", "TinyTaskBed", "build_tiny_task", "git"]

FAST_LIMITS = ExecLimits(kill_grace_s=1, host_grace_s=3)

OPS_BUGGY = '''"""Arithmetic."""


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
'''
OPS_FIXED = OPS_BUGGY.replace("return a - b", "return a + b")
TESTS_BASE = """from calc.ops import mul


def test_mul():
    assert mul(2, 3) == 6
"""
TESTS_WITH_F2P = """from calc.ops import add, mul


def test_mul():
    assert mul(2, 3) == 6


def test_add():
    assert add(2, 3) == 5
"""
TEST_FILE = "tests/test_ops.py"
F2P = "tests/test_ops.py::test_add"
P2P = "tests/test_ops.py::test_mul"


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` (identity given on the command line) and return its stdout."""
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args]
    done = subprocess.run(command, cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout


def _diff_after(repo: Path, path: str, content: str) -> str:
    original = (repo / path).read_text()
    (repo / path).write_text(content)
    diff = git(repo, "diff", "--", path)
    (repo / path).write_text(original)
    return diff


def build_tiny_task(repo: Path, *, instance_id: str = "tiny__calc-1") -> tuple[SWETask, str]:
    """Write the buggy repo at `repo` (one commit) and return (task, gold patch)."""
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(OPS_BUGGY)
    (repo / TEST_FILE).write_text(TESTS_BASE)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "snapshot")
    base_commit = git(repo, "rev-parse", "HEAD").strip()
    test_patch = _diff_after(repo, TEST_FILE, TESTS_WITH_F2P)
    gold_patch = _diff_after(repo, "calc/ops.py", OPS_FIXED)
    task = SWETask(
        instance_id=instance_id,
        repo="tiny/calc",
        base_commit=base_commit,
        problem_statement="`calc.ops.add(2, 3)` returns -1; it should return 5.",
        patch=gold_patch,
        test_patch=test_patch,
        FAIL_TO_PASS=(F2P,),
        PASS_TO_PASS=(P2P,),
        version="1.0",
        environment_setup_commit=base_commit,
        test_files=(TEST_FILE,),
    )
    return task, gold_patch


@dataclass
class TinyTaskBed:
    """Lends local sandboxes holding copies of `template` (for the agent and for grading)."""

    template: Path
    scratch: Path
    lent: list[LocalSandbox] = field(default_factory=list)
    released: list[LocalSandbox] = field(default_factory=list)
    graded_in: list[LocalSandbox] = field(default_factory=list)
    made: int = 0

    def fresh_sandbox(self) -> LocalSandbox:
        self.made += 1
        root = self.scratch / f"sandbox-{self.made}"
        shutil.copytree(self.template, root, symlinks=True)
        return LocalSandbox(root, workdir="/testbed", limits=FAST_LIMITS)

    async def acquire(self, task: object) -> tuple[Sandbox, ReleaseSandbox]:
        sandbox = self.fresh_sandbox()
        self.lent.append(sandbox)

        async def release() -> None:
            self.released.append(sandbox)
            await sandbox.aclose()

        return sandbox, release

    async def grading_sandbox(self, task: object) -> Sandbox:
        sandbox = self.fresh_sandbox()
        self.graded_in.append(sandbox)
        return sandbox
