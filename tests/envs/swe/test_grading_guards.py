"""Pure pieces of the hardened grader: pytest command parsing, the config guards, the probe and
the launcher spec built on it."""

from __future__ import annotations

import json

import pytest

from envs.swe.config_guard import config_file_problem, pytest_settings_changed
from envs.swe.pytest_probe import PytestProbe, launch_spec, parse_probe
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


@pytest.mark.parametrize(
    "patched",
    [
        b"[metadata]\rname = x\r[tool:pytest]\raddopts = -p cheat\r",  # CR only
        b"[metadata]\fname = x\f[tool:pytest]\faddopts = -p cheat\n",  # form feeds
        "[metadata]\u2028[tool:pytest]\naddopts = -p cheat\n".encode(),  # LINE SEPARATOR
        "[metadata]\x85[tool:pytest]\naddopts = -p cheat\n".encode(),  # NEL
    ],
)
def test_a_config_file_with_line_breaks_readers_disagree_on_is_refused(patched: bytes) -> None:
    problem = config_file_problem("setup.cfg", is_symlink=False, patched=patched, base=None)
    assert problem is not None and "LF and CRLF" in problem


def test_a_symlinked_config_file_is_refused() -> None:
    problem = config_file_problem("pyproject.toml", is_symlink=True, patched=None, base=None)
    assert problem is not None and "symlink" in problem


def test_lf_crlf_and_odd_breaks_the_base_already_had_are_accepted() -> None:
    for patched in (b"[metadata]\nname = x\n", b"[metadata]\r\nname = x\r\n"):
        assert (
            config_file_problem("setup.cfg", is_symlink=False, patched=patched, base=None) is None
        )
    legacy = b"# page one\n\f\n# page two\n"
    assert config_file_problem(
        "setup.py", is_symlink=False, patched=legacy + b"x = 1\n", base=legacy
    ) is None  # fmt: skip


def _probe(inipath: str | None, rootdir: str = "/testbed") -> PytestProbe | None:
    raw = {"repo": "/testbed", "rootdir": rootdir, "inipath": inipath, "allowed_shadows": ["m"]}
    return parse_probe(json.dumps(raw).encode(), b"[tool:pytest]\n" if inipath else None)


def test_probe_paths_become_repository_relative() -> None:
    assert _probe("/testbed/sub/setup.cfg", "/testbed/sub") == PytestProbe(
        "sub", "sub/setup.cfg", b"[tool:pytest]\n", ("m",)
    )
    assert _probe(None) == PytestProbe(".", None, None, ("m",))
    assert _probe("/etc/pytest.ini", "/etc") == PytestProbe(
        "/etc", "/etc/pytest.ini", b"[tool:pytest]\n", ("m",)
    )
    assert parse_probe(b"not json", None) is None
    assert parse_probe(b'{"rootdir": 1}', None) is None


@pytest.mark.parametrize(
    ("inipath", "config"),
    [
        (None, {"rootdir": ".", "dir": ".", "name": ".conductor-n1.ini"}),
        (
            "/testbed/pyproject.toml",
            {"rootdir": ".", "copy_from": "p", "dir": ".", "name": ".conductor-n1.toml"},
        ),
        (
            "/testbed/sub/setup.cfg",
            {"rootdir": ".", "copy_from": "p", "dir": "sub", "name": ".conductor-n1.cfg"},
        ),
        ("/testbed/pytest.toml", {"rootdir": ".", "original": "pytest.toml"}),
        ("/etc/tox.ini", {"rootdir": ".", "original": "/etc/tox.ini"}),
    ],
)
def test_the_launcher_gets_a_pristine_copy_beside_the_original(
    inipath: str | None, config: dict[str, str]
) -> None:
    spec = launch_spec(
        report="r.json", canary_ids=("a", "b"), run_only=None, probe=_probe(inipath),
        nonce="n1", pristine_copy="p",
    )  # fmt: skip
    assert spec["config"] == config and spec["allowed_shadows"] == ["m"]
    assert spec["canary_ids"] == ["a", "b"] and spec["run_only"] is None


def test_without_a_probe_the_launcher_reads_the_repositorys_configuration() -> None:
    spec = launch_spec(
        report="r.json", canary_ids=(), run_only=("t",), probe=None, nonce="n", pristine_copy="p"
    )
    assert spec["config"] is None and spec["run_only"] == ["t"]
