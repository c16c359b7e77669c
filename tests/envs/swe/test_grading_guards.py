"""Pure pieces of the hardened grader: pytest command parsing, config guard, canary source."""

from __future__ import annotations

import ast

import pytest

from envs.swe.canary import Canary
from envs.swe.config_guard import pytest_settings_changed
from envs.swe.test_command import PytestCommand, parse_pytest_command


@pytest.mark.parametrize(
    ("command", "parsed"),
    [
        (
            "python3 -m pytest --no-header -rA tests/a.py",
            PytestCommand((), "python3", None, ("--no-header", "-rA", "tests/a.py")),
        ),
        ("pytest -rA", PytestCommand((), None, "pytest", ("-rA",))),
        (
            "/opt/env/bin/python3.9 -m pytest -k 'a and (b or c)'",
            PytestCommand((), "/opt/env/bin/python3.9", None, ("-k", "a and (b or c)")),
        ),
        (
            "PYTHONPATH=src LANG=C.UTF-8 pytest t.py::test_x[1-2]",
            PytestCommand(
                (("PYTHONPATH", "src"), ("LANG", "C.UTF-8")), None, "pytest", ("t.py::test_x[1-2]",)
            ),
        ),
    ],
)
def test_plain_pytest_commands_are_recognised(command: str, parsed: PytestCommand) -> None:
    assert parse_pytest_command(command) == parsed


@pytest.mark.parametrize(
    "command",
    [
        "pytest a; rm -rf /",
        "cd sub && pytest",
        "pytest $(cat tests.txt)",
        "pytest `ls`",
        "pytest | tee log",
        "./tests/runtests.py --verbosity 2",
        "tox -epy39 --",
        "python3 tests/run.py",
        "pytest 'unterminated",
        "X=1",
    ],
)
def test_anything_else_runs_unhardened(command: str) -> None:
    assert parse_pytest_command(command) is None


BASE_PYPROJECT = b'[project]\nname = "calc"\nversion = "1.0"\n'


@pytest.mark.parametrize(
    ("path", "patched", "changed"),
    [
        ("pyproject.toml", b'[project]\nname = "calc"\nversion = "1.1"\n', False),
        ("pyproject.toml", BASE_PYPROJECT + b'[tool.pytest.ini_options]\naddopts = "-p x"\n', True),
        ("pyproject.toml", BASE_PYPROJECT + b'[tool.pytest]\naddopts = ["-p", "x"]\n', True),
        ("pyproject.toml", b"[project\n", True),  # unparsable: pytest may read it otherwise
        ("sub/setup.cfg", b"[metadata]\nname = calc\n", False),
        ("sub/setup.cfg", b"[tool:pytest]\naddopts = -p x\n", True),
        ("README.md", b"anything", False),
    ],
)
def test_pytest_sections_are_guarded_and_the_rest_is_not(
    path: str, patched: bytes, changed: bool
) -> None:
    base = BASE_PYPROJECT if path.endswith(".toml") else b"[metadata]\nname = calc\n"
    assert pytest_settings_changed(path, base, patched) is changed


def test_a_new_pytest_config_file_counts_as_a_change() -> None:
    assert pytest_settings_changed("setup.cfg", None, b"[tool:pytest]\naddopts = -p x\n")
    assert not pytest_settings_changed("setup.cfg", None, b"[metadata]\nname = x\n")


def test_the_canary_module_is_valid_python_with_both_tests() -> None:
    canary = Canary("ab12")
    tree = ast.parse(canary.source())
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert names == {canary.pass_name, canary.fail_name}
    assert canary.is_canary(f"x/{canary.module_name}::{canary.pass_name}")
    assert not canary.is_canary("tests/test_a.py::test_canary_passes_other")
    assert Canary("ab12").expected_output != Canary("ab13").expected_output
