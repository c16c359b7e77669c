"""The import-layer contracts in pyproject.toml hold, and each one breaks on a forbidden import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

PACKAGES = ("foundation", "harness", "envs", "rollout", "kvcache")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    selected = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *selected],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_shipped_tree_keeps_every_contract() -> None:
    done = _lint_imports(REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken" not in done.stdout.lower().replace("0 broken", "")


@pytest.mark.parametrize(
    ("contract", "module", "forbidden_import"),
    [
        ("rollout-layers", "rollout/core/scheduler.py", "import rollout.runtime.conductor"),
        ("rollout-layers", "rollout/engines/sim/engine.py", "import rollout.runtime.dispatch"),
        ("rollout-layers", "rollout/observe/metrics.py", "import rollout.simulation.vtime"),
        ("pure-core", "rollout/core/admission.py", "import asyncio"),
        ("pure-core", "rollout/core/priority.py", "import harness.sandbox.docker"),
        ("light-imports", "kvcache/tree.py", "import harness.events"),
        ("light-imports", "kvcache/sglang_plugin/config.py", "import docker"),
        ("ground-floor", "foundation/clock.py", "import numpy"),
        ("packages", "foundation/config.py", "import harness.errors"),
        ("packages", "harness/pool.py", "import rollout.core.types"),
        ("packages", "kvcache/tree.py", "import envs.swe.env"),
        ("acyclic", "envs/swe/sandbox_source.py", "import envs.swe.env"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tmp_path: Path, contract: str, module: str, forbidden_import: str
) -> None:
    for package in PACKAGES:
        shutil.copytree(
            REPO_ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _lint_imports(tmp_path, contract).returncode == 0
    path = tmp_path / module
    path.write_text(path.read_text() + f"\n{forbidden_import}  # injected by the test\n")
    done = _lint_imports(tmp_path, contract)
    assert done.returncode != 0
    assert f"{Path(module).stem} ->" in done.stdout  # the report names the offending import


LIGHT_MODULES = (
    "rollout.core.scheduler",
    "rollout.core.admission",
    "rollout.core.priority",
    "kvcache",
    "kvcache.sglang_plugin.config",
    "kvcache.sglang_plugin.hints",
    "foundation",
)
HEAVY_MODULES = ("docker", "gymnasium", "aiohttp", "harness", "envs", "torch")


def test_the_core_and_the_kv_manager_import_no_harness_docker_or_gymnasium() -> None:
    """What actually lands in `sys.modules` (the contracts do not see a parent package's
    `__init__`): a fresh interpreter imports the light modules and lists the heavy ones."""
    script = (
        "import importlib, sys\n"
        f"for name in {LIGHT_MODULES!r}: importlib.import_module(name)\n"
        f"print(','.join(m for m in {HEAVY_MODULES!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"heavy modules imported: {done.stdout.strip()}"
