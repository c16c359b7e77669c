"""Canary placement (pure) and injected canaries run by a real pytest: they sit in the task's
own test file, in a task test's class, under names in its style, drawn anew per nonce."""

from __future__ import annotations

import ast
import hashlib
import subprocess
import sys
from pathlib import Path

from envs.swe.canary import CanaryPlan, canary_host_files, plan_canaries

HOST = "tests/test_core.py"
SOURCE = """import pytest

from mylib import clamp, double


def test_double_keeps_sign():
    assert double(-2) == -4


class TestClamp:
    def test_clamp_below_low(self):
        assert clamp(-5, 0, 10) == 0

    @pytest.mark.parametrize("value", [1, 5])
    def test_clamp_inside_range(self, value):
        assert clamp(value, 0, 10) == value
"""
LIB = (
    "def clamp(v, lo, hi):\n    return max(lo, min(v, hi))\n\n\ndef double(v):\n    return 2 * v\n"
)
F2P = (f"{HOST}::TestClamp::test_clamp_below_low",)
P2P = (f"{HOST}::test_double_keeps_sign", f"{HOST}::TestClamp::test_clamp_inside_range[1]")
OUTPUT = ".git/conductor/n/canary.out"


def plan(nonce: str, source: str | None = SOURCE, **overrides: object) -> CanaryPlan:
    f2p = overrides.get("f2p", F2P)
    p2p = overrides.get("p2p", P2P)
    files = overrides.get("test_files", (HOST,))
    hosts = canary_host_files(nonce, f2p, p2p, files)  # type: ignore[arg-type]
    return plan_canaries(
        nonce, f2p, p2p, files, {path: source for path in hosts},  # type: ignore[arg-type]
        output_path=OUTPUT, fallback_dir=".git/conductor/n",
    )  # fmt: skip


def defined_names(text: str) -> dict[str, set[str]]:
    """`{scope: names}` for the module (`""`) and each top-level class."""
    tree = ast.parse(text)
    scopes: dict[str, set[str]] = {"": set()}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            scopes[""].add(node.name)
        elif isinstance(node, ast.ClassDef):
            scopes[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return scopes


def test_the_fail_canary_sits_beside_a_fail_to_pass_test_in_its_file_and_class() -> None:
    for nonce in ("a1", "b2", "c3", "d4"):
        result = plan(nonce)
        canary = result.canary
        assert set(result.files) == {HOST}
        assert canary.fail_id.startswith(f"{HOST}::TestClamp::test_")
        assert canary.pass_id.startswith(f"{HOST}::")
        scopes = defined_names(result.files[HOST])
        assert canary.fail_id.rsplit("::", 1)[1] in scopes["TestClamp"]
        # the task's own tests are all still there
        assert {"test_clamp_below_low", "test_clamp_inside_range"} <= scopes["TestClamp"]
        assert "test_double_keeps_sign" in scopes[""]


def test_names_and_places_are_drawn_per_nonce_and_repeatable() -> None:
    assert plan("a1") == plan("a1")
    drawn = {plan(nonce).canary.fail_id for nonce in ("a1", "b2", "c3", "d4", "e5", "f6")}
    assert len(drawn) == 6
    texts = {plan(nonce).files[HOST] for nonce in ("a1", "b2", "c3", "d4", "e5", "f6")}
    assert len(texts) == 6


def test_names_are_made_of_the_files_own_test_words_and_collide_with_nothing() -> None:
    own_words = {"double", "keeps", "sign", "clamp", "below", "low", "inside", "range"}
    seen: set[str] = set()
    for nonce in ("a1", "b2", "c3", "d4", "e5", "f6"):
        for test_id in plan(nonce).canary.ids:
            name = test_id.rsplit("::", 1)[1]
            assert name.startswith("test_") and name not in SOURCE
            seen |= set(name.removeprefix("test_").split("_"))
    assert seen & own_words


def test_injected_canaries_run_as_the_grader_expects_under_a_real_pytest(tmp_path: Path) -> None:
    result = plan("5eed")
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text(LIB)
    (tmp_path / "tests").mkdir()
    (tmp_path / HOST).write_text(result.files[HOST])
    (tmp_path / ".git/conductor/n").mkdir(parents=True)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", HOST],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    canary = result.canary
    assert f"PASSED {canary.pass_id}" in ran.stdout, ran.stdout
    assert f"FAILED {canary.fail_id}" in ran.stdout, ran.stdout
    for task_test in (*F2P, *P2P):
        assert f"PASSED {task_test}" in ran.stdout
    digest = hashlib.sha256(b"conductor canary 5eed").hexdigest()
    assert (tmp_path / OUTPUT).read_text() == digest == canary.expected_output


def test_a_class_whose_marks_would_reach_a_canary_hosts_it_at_module_level() -> None:
    marked = SOURCE.replace(
        "class TestClamp:", '@pytest.mark.parametrize("x", [1])\nclass TestClamp:'
    )
    marked = marked.replace("(self):", "(self, x):").replace("(self, value)", "(self, value, x)")
    canary = plan("a1", marked).canary
    assert canary.fail_id.count("::") == 1 and canary.fail_id.startswith(f"{HOST}::test_")


def test_a_module_that_skips_everything_or_cannot_be_parsed_gets_a_module_beside_it() -> None:
    skipped = SOURCE.replace("import pytest\n", "import pytest\npytestmark = pytest.mark.skip\n")
    for source in (skipped, "def test_x(:\n", None):
        result = plan("a1", source)
        (path,) = result.files
        assert path.startswith("tests/test_") and path != HOST
        assert {test_id.split("::")[0] for test_id in result.canary.ids} == {path}
        assert result.collect_files == (path,)
        ast.parse(result.files[path])


def test_without_any_python_test_file_the_canaries_go_to_the_fallback_directory() -> None:
    result = plan("a1", None, f2p=("README.rst::README.rst",), p2p=(), test_files=("README.rst",))
    (path,) = result.files
    assert path.startswith(".git/conductor/n/test_")


def test_crlf_files_stay_crlf_and_tab_indented_files_stay_tabbed() -> None:
    crlf = plan("a1", SOURCE.replace("\n", "\r\n")).files[HOST]
    assert "\n" not in crlf.replace("\r\n", "")
    tabbed = SOURCE.replace("    ", "\t")
    text = plan("b2", tabbed).files[HOST]
    ast.parse(text)
    assert "    " not in text
