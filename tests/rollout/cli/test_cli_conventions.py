"""The `conductor` command follows the conventions users bring: `--version`, dotted overrides
into every file, overrides as the first argument, SGLang's server flags on serve-sim, and an
engine that does not answer found in seconds, before any run directory."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollout.cli.app import app
from rollout.cli.console import config_and_overrides

DEFAULT = Path("/configs/run/default.yaml")


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("conductor (aio-conductor) ")


@pytest.mark.parametrize(
    "first",
    ["tasks_file=/data/tasks.jsonl", "pool.act_slots=4", "sources=[{name: a, env: x/y.py:E}]"],
)
def test_a_first_argument_that_starts_with_a_key_is_an_override(first: str) -> None:
    config, overrides = config_and_overrides(Path(first), ["steps=1"], DEFAULT)
    assert config == DEFAULT and overrides == [first, "steps=1"]


def test_a_first_argument_that_names_a_file_is_the_config(tmp_path: Path) -> None:
    odd = tmp_path / "a=b.yaml"
    odd.write_text("{}")
    assert config_and_overrides(odd, [], DEFAULT) == (odd, [])
    assert config_and_overrides(Path("configs/run/mixed.yaml"), None, DEFAULT)[1] == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_serve_sim_takes_sglangs_host_port_and_engine_flags() -> None:
    port = _free_port()
    command = [
        sys.executable, "-m", "rollout.cli", "serve-sim", "--host", "127.0.0.1",
        "--port", str(port), "--max-running-requests", "3", "--served-model-name", "mine",
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        info = None
        for _ in range(100):
            try:
                with direct.open(f"http://127.0.0.1:{port}/server_info", timeout=1) as reply:
                    info = json.load(reply)
                break
            except OSError:
                time.sleep(0.2)
        assert info is not None, "serve-sim did not answer"
        assert info["max_running_requests"] == 3
        with direct.open(f"http://127.0.0.1:{port}/v1/models", timeout=5) as reply:
            assert json.load(reply)["data"][0]["id"] == "mine"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_run_on_an_engine_that_does_not_answer_fails_in_seconds_before_a_run_directory(
    tmp_path: Path,
) -> None:
    port = _free_port()  # nothing listens there
    started = time.monotonic()
    result = CliRunner().invoke(
        app,
        [
            "run",
            "configs/run/sglang.yaml",
            f"engine.endpoints=[http://127.0.0.1:{port}]",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 1
    assert "no engine answers at" in result.output
    assert time.monotonic() - started < 15
    assert not any(tmp_path.iterdir()), "no run directory for a run that never started"
