"""The second verdict's patch: only the non-test source changes of the agent's patch, made with
real git so the diffs are the ones the grader extracts."""

from __future__ import annotations

import subprocess
from pathlib import Path

from envs.swe.config import GradingConfig
from envs.swe.grading import is_test_path
from envs.swe.source_patch import shadows_stdlib, source_changes


def _git(repo: Path, *args: str) -> bytes:
    command = ["git", "-c", "user.name=u", "-c", "user.email=u@example.invalid", *args]
    return subprocess.run(command, cwd=repo, check=True, capture_output=True).stdout


def _diff_of(tmp_path: Path, change: dict[str, str | bytes | None], links: dict[str, str]) -> bytes:
    repo = tmp_path / "repo"
    (repo / "mylib").mkdir(parents=True)
    (repo / "mylib" / "core.py").write_text("def f():\n    return 1\n")
    (repo / "setup.cfg").write_text("[metadata]\nname = mylib\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    for path, content in change.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            target.unlink()
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    for path, points_to in links.items():
        (repo / path).symlink_to(points_to)
    _git(repo, "add", "-A")
    return _git(repo, "diff", "--cached", "--binary", "--no-renames", "HEAD")


def _drop(path: str) -> bool:
    config = GradingConfig()
    return (
        is_test_path(path, (), config.test_path_patterns)
        or is_test_path(path, (), config.config_file_patterns)
        or shadows_stdlib(path)
    )


def test_source_changes_are_kept_and_everything_else_is_dropped(tmp_path: Path) -> None:
    diff = _diff_of(
        tmp_path,
        {
            "mylib/core.py": "def f():\n    return 2\n",
            "mylib/new.py": "X = 1\n",
            "mylib/data.bin": bytes(range(256)),
            "tests/test_core.py": "def test_f():\n    pass\n",
            "setup.cfg": "[metadata]\rname = x\r[tool:pytest]\raddopts = -p cheat\r",
            "pdb.py": "print('shadow')\n",
            "conftest.py": "x = 1\n",
            "cheat_settings.toml": "[tool.pytest.ini_options]\n",
        },
        {"pyproject.toml": "cheat_settings.toml", "mylib/link.py": "new.py"},
    )
    kept = source_changes(diff, _drop)
    for path in ("mylib/core.py", "mylib/new.py", "mylib/data.bin", "cheat_settings.toml"):
        assert f"diff --git a/{path} b/{path}".encode() in kept.diff, path
    assert set(kept.dropped_paths) == {
        "tests/test_core.py", "setup.cfg", "pdb.py", "conftest.py", "pyproject.toml",
        "mylib/link.py",
    }  # fmt: skip
    assert b"GIT binary patch" in kept.diff


def test_the_kept_part_applies_on_the_base_tree(tmp_path: Path) -> None:
    diff = _diff_of(tmp_path, {"mylib/core.py": "def f():\n    return 2\n", "pdb.py": "x\n"}, {})
    kept = source_changes(diff, _drop)
    repo = tmp_path / "repo"
    _git(repo, "reset", "-q", "--hard", "HEAD")
    (repo / "kept.patch").write_bytes(kept.diff)
    _git(repo, "apply", "kept.patch")
    assert (repo / "mylib" / "core.py").read_text().endswith("return 2\n")
    assert not (repo / "pdb.py").exists()


def test_a_removed_line_that_looks_like_a_file_header_is_not_a_path(tmp_path: Path) -> None:
    added = _diff_of(tmp_path, {"mylib/core.py": "def f():\n    return 1\n-- tests/x.py\n"}, {})
    removed = added.replace(b"+-- tests", b"--- tests")  # as a removed "-- tests/x.py" reads
    assert b"\n--- tests/x.py\n" in removed
    assert source_changes(removed, _drop).dropped_paths == ()


def test_a_plain_unified_diff_is_split_by_file_too() -> None:
    plain = (
        b"--- a/mylib/core.py\n+++ b/mylib/core.py\n@@ -1 +1 @@\n-x\n+y\n"
        b"--- a/tests/test_core.py\n+++ b/tests/test_core.py\n@@ -1 +1 @@\n-x\n+y\n"
    )
    kept = source_changes(plain, _drop)
    assert kept.diff.startswith(b"--- a/mylib/core.py") and b"tests/" not in kept.diff
    assert kept.dropped_paths == ("tests/test_core.py",)


def test_only_root_modules_named_like_the_standard_library_shadow_it() -> None:
    assert shadows_stdlib("pdb.py") and shadows_stdlib("email/__init__.py")
    assert not shadows_stdlib("mylib/pdb.py") and not shadows_stdlib("mylib.py")
    assert not shadows_stdlib("README") and not shadows_stdlib("pdb.txt")
