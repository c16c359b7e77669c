"""Snapshots: git-style diffs, git object ids without git, hidden tests, deterministic commits."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from envs.swe.taskgen.diffs import changed_paths, diff_paths, unified_diff
from envs.swe.taskgen.gitobjects import SNAPSHOT_IDENTITY, commit_id, tree_id
from envs.swe.taskgen.hidden_tests import definitions_by_file, hide_tests
from envs.swe.taskgen.project_files import read_project, write_snapshot
from envs.swe.taskgen.snapshot import commit_snapshot, git, snapshot_commit

OLD = {
    "pkg/a.py": "one\ntwo\nthree\n",
    "pkg/gone.py": "bye\n",
    "tail.txt": "no newline",
}
NEW = {
    "pkg/a.py": "one\n2\nthree\n",
    "pkg/new.py": "hello\n",
    "tail.txt": "no newline at all",
}


def apply_with_git(repo: Path, diff: str, *extra: str) -> None:
    subprocess.run(
        ["git", "apply", *extra, "-"],
        cwd=repo,
        input=diff,
        text=True,
        check=True,
        capture_output=True,
    )


def test_diff_turns_old_snapshot_into_new_with_git_apply(tmp_path: Path) -> None:
    write_snapshot(OLD, tmp_path)
    apply_with_git(tmp_path, unified_diff(OLD, NEW))
    assert read_project(tmp_path) == NEW


def test_diff_reverse_applies_back_to_the_old_snapshot(tmp_path: Path) -> None:
    write_snapshot(NEW, tmp_path)
    apply_with_git(tmp_path, unified_diff(OLD, NEW), "-R")
    assert read_project(tmp_path) == OLD


def test_diff_has_git_headers_for_added_and_deleted_files() -> None:
    diff = unified_diff(OLD, NEW)
    assert "diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\n--- /dev/null\n" in diff
    assert "diff --git a/pkg/gone.py b/pkg/gone.py\ndeleted file mode 100644\n" in diff
    assert "\\ No newline at end of file\n" in diff


def test_equal_snapshots_have_an_empty_diff() -> None:
    assert unified_diff(OLD, dict(OLD)) == ""


def test_changed_and_diffed_paths_agree() -> None:
    assert changed_paths(OLD, NEW) == ["pkg/a.py", "pkg/gone.py", "pkg/new.py", "tail.txt"]
    assert diff_paths(unified_diff(OLD, NEW)) == changed_paths(OLD, NEW)


def test_path_with_whitespace_is_refused() -> None:
    with pytest.raises(ValueError, match="whitespace"):
        unified_diff({}, {"a b.py": "x\n"})


def test_tree_and_commit_ids_match_what_git_computes(tmp_path: Path) -> None:
    files = {"a/b/f.py": "x\n", "a-b/g": "y\n", "a.txt": "z", "a/c": "ü\n"}
    write_snapshot(files, tmp_path)
    head = commit_snapshot(tmp_path)
    assert git(tmp_path, "rev-parse", "HEAD^{tree}").strip() == tree_id(
        {path: text.encode() for path, text in files.items()}
    )
    assert head == snapshot_commit(files)


def test_commit_id_depends_on_the_identity() -> None:
    tree = tree_id({"a.py": b"x\n"})
    other = SNAPSHOT_IDENTITY.__class__("someone", "x@example.invalid", 0, "msg\n")
    assert commit_id(tree) != commit_id(tree, other)


def test_snapshot_commit_is_the_only_commit(tmp_path: Path) -> None:
    write_snapshot({"a.py": "x\n"}, tmp_path)
    commit_snapshot(tmp_path)
    assert git(tmp_path, "rev-list", "--all", "--count").strip() == "1"
    assert git(tmp_path, "log", "--format=%an <%ae> %at%n%B").strip() == (
        "swe-taskset <swe-taskset@example.invalid> 1767225600\nInitial commit"
    )


TEST_FILE = """\
import pytest

HELPER = 1


def test_kept():
    assert HELPER


# a comment about the hidden test
@pytest.mark.parametrize("x", [1, 2])
def test_hidden(x):
    assert x


class TestGroup:
    def test_method(self):
        pass


def test_also_kept():
    pass
"""


def test_hidden_definition_goes_with_its_decorators_and_comment() -> None:
    hidden = hide_tests({"tests/test_m.py": TEST_FILE}, ["tests/test_m.py::test_hidden[1]"])
    text = hidden["tests/test_m.py"]
    assert "test_hidden" not in text
    assert "a comment about the hidden test" not in text
    assert "parametrize" not in text
    assert "def test_kept():\n    assert HELPER\n\n\nclass TestGroup:" in text


def test_class_of_a_hidden_method_is_hidden() -> None:
    hidden = hide_tests({"tests/test_m.py": TEST_FILE}, ["tests/test_m.py::TestGroup::test_method"])
    assert "TestGroup" not in hidden["tests/test_m.py"]
    assert hidden["tests/test_m.py"].endswith("def test_also_kept():\n    pass\n")


def test_file_left_without_tests_is_removed() -> None:
    ids = [
        f"tests/test_m.py::{name}"
        for name in ("test_kept", "test_hidden[2]", "TestGroup::test_method", "test_also_kept")
    ]
    assert hide_tests({"tests/test_m.py": TEST_FILE, "m.py": "x = 1\n"}, ids) == {"m.py": "x = 1\n"}


def test_unknown_test_definition_is_an_error() -> None:
    with pytest.raises(ValueError, match="test_nope"):
        hide_tests({"tests/test_m.py": TEST_FILE}, ["tests/test_m.py::test_nope"])


def test_definitions_by_file_strip_parameters_and_methods() -> None:
    assert definitions_by_file(["t/test_a.py::test_x[a b]", "t/test_a.py::K::test_y"]) == {
        "t/test_a.py": {"test_x", "K"}
    }
