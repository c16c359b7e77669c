"""The grader's pytest launcher, run for real (this interpreter, its pytest) on a small repository:
the probe names the configuration pytest picks; the run reads only the pristine copy; nothing of
the repository shadows the standard library or an installed plugin; canaries a selection
dropped still run; `run_only` limits the run but not the collection."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

LAUNCHER = resources.files("envs.swe.grading_assets").joinpath("launch_pytest.py")
ARGS = ["-rA", "-p", "no:cacheprovider", "tests/test_core.py"]
TESTS = (
    "from mylib import ok\n\n\ndef test_a():\n    assert ok()\n\n\ndef test_b():\n    assert ok()\n"
)
MARKER = "import pathlib\npathlib.Path(__file__).with_name('{name}.ran').write_text('x')\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "mylib").mkdir(parents=True)
    (root / "mylib" / "__init__.py").write_text("def ok():\n    return True\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text(TESTS)
    (root / ".scratch").mkdir()
    return root


def launch(repo: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    with resources.as_file(LAUNCHER) as launcher:
        return subprocess.run(
            [sys.executable, "-I", str(launcher), *argv],
            cwd=repo, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip


def probe(repo: Path) -> dict[str, Any]:
    done = launch(repo, "--probe", ".scratch/probe.json", ".scratch/ini", "--", *ARGS)
    assert done.returncode == 0, done.stderr
    return json.loads((repo / ".scratch" / "probe.json").read_text())  # type: ignore[no-any-return]


def run(repo: Path, **spec: Any) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    spec = {"report": ".scratch/report.json", "canary_ids": [], **spec}
    (repo / ".scratch" / "spec.json").write_text(json.dumps(spec))
    done = launch(repo, ".scratch/spec.json", "--", *ARGS)
    report_file = repo / ".scratch" / "report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    return done, report


def pristine(probed: dict[str, Any]) -> dict[str, Any]:
    """The spec's `config` as the grader builds it from a probe (repository root here)."""
    config = {"rootdir": probed["rootdir"], "dir": probed["rootdir"], "name": ".conductor-x.ini"}
    if probed["inipath"] is not None:
        name = ".conductor-x" + Path(probed["inipath"]).suffix
        config.update(dir=str(Path(probed["inipath"]).parent), name=name)
        config["copy_from"] = ".scratch/ini"
    return config


def test_the_probe_names_the_file_pytest_reads_and_copies_its_bytes(repo: Path) -> None:
    (repo / "setup.cfg").write_text("[tool:pytest]\naddopts = -v\n")
    probed = probe(repo)
    assert probed["inipath"] == str(repo / "setup.cfg") and probed["rootdir"] == str(repo)
    assert (repo / ".scratch" / "ini").read_bytes() == (repo / "setup.cfg").read_bytes()


def test_the_probe_exempts_protected_names_the_base_commit_provides(repo: Path) -> None:
    (repo / "fractions.py").write_text("X = 1\n")  # the repository's own, at the base commit
    allowed = probe(repo)["allowed_shadows"]
    assert "fractions" in allowed and "pdb" not in allowed and "mylib" not in allowed


def test_the_run_reads_only_the_pristine_copy_of_the_configuration(repo: Path) -> None:
    (repo / "setup.cfg").write_text("[tool:pytest]\naddopts = -v\n")
    config = pristine(probe(repo))
    # What a patch then does to the configuration: a CR-only setup.cfg, a symlinked
    # pyproject.toml, each loading a plugin that does not exist (pytest would stop on it).
    (repo / "setup.cfg").write_bytes(b"[metadata]\rname = x\r[tool:pytest]\raddopts = -p nope_a\r")
    (repo / "settings.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p nope_b"\n')
    (repo / "pyproject.toml").symlink_to("settings.toml")
    done, report = run(repo, config=config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["tests"] == {"tests/test_core.py::test_a": "PASSED",
                               "tests/test_core.py::test_b": "PASSED"}  # fmt: skip
    assert "test_core.py::test_a PASSED" in done.stdout  # -v from the pristine copy
    assert not list(repo.glob(".conductor-*"))  # the copy is gone after the run
    unpinned, _ = run(repo, config=None)
    assert unpinned.returncode != 0 and "nope_b" in unpinned.stdout + unpinned.stderr


def test_a_root_module_named_like_the_standard_library_is_never_imported(repo: Path) -> None:
    config = pristine(probe(repo))
    (repo / "pdb.py").write_text(MARKER.format(name="pdb"))  # pytest imports pdb to configure
    done, _ = run(repo, config=config)
    assert done.returncode == 0 and not (repo / "pdb.ran").exists(), done.stdout + done.stderr
    run(repo, config=config, allowed_shadows=["pdb"])  # as if the base commit had it
    assert (repo / "pdb.ran").exists()


def test_a_root_module_named_like_an_installed_plugin_is_never_imported(repo: Path) -> None:
    pytest.importorskip("pytest_timeout")  # a plugin of this project's test environment
    config = pristine(probe(repo))
    (repo / "pytest_timeout.py").write_text(MARKER.format(name="pytest_timeout"))
    done, _ = run(repo, config=config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (repo / "pytest_timeout.ran").exists()


def test_a_pytest_module_in_the_repository_is_not_the_runner(repo: Path) -> None:
    (repo / "pytest.py").write_text("raise SystemExit(0)\n")
    done, report = run(repo, config=pristine(probe(repo)))
    assert done.returncode == 0 and not report["runner_file"].startswith(str(repo))


def test_canaries_the_selection_dropped_still_run(repo: Path) -> None:
    global ARGS
    canary = "tests/test_core.py::test_b"
    saved = ARGS
    ARGS = [*saved[:-1], "-k", "test_a", saved[-1]]
    try:
        _, report = run(repo, config=pristine(probe(repo)), canary_ids=[canary])
    finally:
        ARGS = saved
    assert report["tests"] == {"tests/test_core.py::test_a": "PASSED", canary: "PASSED"}


def test_run_only_limits_the_run_and_the_report_still_lists_the_collection(repo: Path) -> None:
    (repo / "tests" / "test_core.py").write_text(TESTS + "\n\ndef test_c():\n    assert 0\n")
    _, report = run(
        repo, config=pristine(probe(repo)), run_only=["tests/test_core.py::test_a"],
        canary_ids=["tests/test_core.py::test_c"],
    )  # fmt: skip
    assert report["tests"] == {"tests/test_core.py::test_a": "PASSED",
                               "tests/test_core.py::test_c": "FAILED"}  # fmt: skip
    assert report["collected"] == [f"tests/test_core.py::test_{x}" for x in "abc"]


def test_an_explicit_config_option_of_the_command_is_replaced(repo: Path) -> None:
    (repo / "ci.ini").write_text("[pytest]\naddopts = -v\n")
    global ARGS
    saved = ARGS
    ARGS = ["-c", "ci.ini", *saved]
    try:
        probed = probe(repo)
        assert probed["inipath"] == str(repo / "ci.ini")
        (repo / "ci.ini").write_text("[pytest]\naddopts = -p nope_c\n")
        done, _ = run(repo, config=pristine(probed))
    finally:
        ARGS = saved
    assert done.returncode == 0 and "test_a PASSED" in done.stdout, done.stdout + done.stderr


def test_exitfirst_does_not_stop_the_run_at_the_fail_canary(repo: Path) -> None:
    failing_first = "def test_0():\n    assert 0\n\n\n" + TESTS
    (repo / "tests" / "test_core.py").write_text(failing_first)
    (repo / "setup.cfg").write_text("[tool:pytest]\naddopts = -x\n")
    done, report = run(
        repo, config=pristine(probe(repo)), canary_ids=["tests/test_core.py::test_0"]
    )
    assert report["tests"] == {
        "tests/test_core.py::test_0": "FAILED",
        "tests/test_core.py::test_a": "PASSED",
        "tests/test_core.py::test_b": "PASSED",
    }, done.stdout
