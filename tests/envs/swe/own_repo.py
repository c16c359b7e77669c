"""A user's own repository made on the fly: history, a bug, its fix, a test patch, an executable
script and a binary file, and the SWE-bench record that describes it.

`make_own_repo(dir)` returns an `OwnRepo` with the repository, its bundle, the record and the
ids a test needs to check that the fix cannot be recovered from the task's image.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BINARY", "OwnRepo", "make_own_repo"]

BINARY = bytes(range(256)) * 4
CORE_BUGGY = '''"""Core helpers."""


def clamp(value, low, high):
    return max(low, min(value, low))


def double(value):
    return value * 2
'''
CORE_FIXED = CORE_BUGGY.replace("min(value, low)", "min(value, high)")
TEST_BASE = "from mylib.core import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
TEST_FIXED = TEST_BASE + "\n\ndef test_clamp():\n    assert clamp(5, 0, 10) == 5\n"
TEST_FIXED = TEST_FIXED.replace("import double", "import clamp, double")
F2P = "tests/test_core.py::test_clamp"
P2P = "tests/test_core.py::test_double"


@dataclass(frozen=True)
class OwnRepo:
    path: Path
    bundle: Path
    base_commit: str
    fix_commit: str
    fixed_blob: str
    record: dict[str, Any]

    def write_tasks(self, path: Path, **fields: Any) -> Path:
        path.write_text(json.dumps({**self.record, **fields}) + "\n")
        return path


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=u", "-c", "user.email=u@example.invalid", *args]
    return subprocess.run(command, cwd=repo, check=True, capture_output=True, text=True).stdout


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def make_own_repo(root: Path) -> OwnRepo:
    repo = root / "mylib-repo"
    (repo / "mylib").mkdir(parents=True)
    (repo / "tests").mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "mylib" / "__init__.py").write_text("")
    (repo / "mylib" / "core.py").write_text(CORE_BUGGY.replace("def double", "def twice"))
    (repo / "README.md").write_text("mylib\n")
    _commit(repo, "first version")
    (repo / "mylib" / "core.py").write_text(CORE_BUGGY)
    (repo / "tests" / "test_core.py").write_text(TEST_BASE)
    (repo / "run.sh").write_text("#!/bin/sh\necho script-ran\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "data.bin").write_bytes(BINARY)
    base = _commit(repo, "rename twice to double, add a script and data")
    (repo / "mylib" / "core.py").write_text(CORE_FIXED)
    (repo / "tests" / "test_core.py").write_text(TEST_FIXED)
    fix = _commit(repo, "fix clamp")
    patch = _git(repo, "diff", base, fix, "--", "mylib")
    test_patch = _git(repo, "diff", base, fix, "--", "tests")
    fixed_blob = _git(repo, "rev-parse", f"{fix}:mylib/core.py").strip()
    bundle = root / "mylib.bundle"
    _git(repo, "bundle", "create", "-q", str(bundle), "--all")
    record = {
        "repo": "me/mylib",
        "instance_id": "me__mylib-1",
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": "clamp(5, 0, 10) returns 0; it should return 5.",
        "FAIL_TO_PASS": json.dumps([F2P]),
        "PASS_TO_PASS": json.dumps([P2P]),
        "version": "1.0",
        "environment_setup_commit": base,
        "test_files": ["tests/test_core.py"],
    }
    return OwnRepo(repo, bundle, base, fix, fixed_blob, record)
