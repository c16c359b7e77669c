"""SGLang's own HTTP test kits (from the 0.5.23 wheel) against `conductor serve-sim`.

The kits are unittest mixins that need only `base_url` and `process` (`sglang/test/kits/`):
`basic_api_contract_kit`, `pause_generation_kit` and `abort_timeout_kit`. Their files are read
from the wheel that `make sglang-wheel` caches under `.cache/sglang/` (no install: they import
only `requests`), and each kit test runs as its own pytest test against a serve-sim process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import types
import unittest
import zipfile
from collections.abc import Iterator

import pytest
import requests

from tests.paths import REPO_ROOT

WHEELS = sorted((REPO_ROOT / ".cache" / "sglang").glob("sglang-0.5.23-*.whl"))
REQUIRED = os.environ.get("CONDUCTOR_REQUIRE_SGLANG_KITS") == "1"
KITS = {
    "basic_api_contract_kit": ["BasicAPIContractMixin"],
    "pause_generation_kit": ["PauseResumeInPlaceMixin"],
    "abort_timeout_kit": ["AbortAllMixin"],
}
KIT_TESTS = [
    ("BasicAPIContractMixin", "test_health"),
    ("BasicAPIContractMixin", "test_health_generate"),
    ("BasicAPIContractMixin", "test_get_server_info"),
    ("BasicAPIContractMixin", "test_get_model_info"),
    ("BasicAPIContractMixin", "test_openai_chat_completion"),
    ("BasicAPIContractMixin", "test_openai_completion"),
    ("PauseResumeInPlaceMixin", "test_pause_resume_in_place"),
    ("AbortAllMixin", "test_abort_all"),
]

pytestmark = pytest.mark.slow


def _kit_mixins() -> dict[str, type]:
    if not WHEELS:
        message = "no SGLang 0.5.23 wheel under .cache/sglang; run `make sglang-wheel`"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    mixins: dict[str, type] = {}
    with zipfile.ZipFile(WHEELS[-1]) as wheel:
        for kit, names in KITS.items():
            path = f"sglang/test/kits/{kit}.py"
            module = types.ModuleType(f"sglang_kit_{kit}")
            exec(compile(wheel.read(path).decode(), path, "exec"), module.__dict__)
            mixins.update({name: getattr(module, name) for name in names})
    return mixins


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def serve_sim() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`conductor serve-sim` in its own process, as the kits expect a server process."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "rollout.cli", "serve-sim", f"port={port}"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                stderr = process.stderr.read().decode() if process.stderr else ""
                pytest.fail(f"serve-sim did not come up: {stderr[-2000:]}")
            time.sleep(0.2)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize(("mixin", "test_name"), KIT_TESTS)
def test_sglang_http_kit_passes_against_serve_sim(
    serve_sim: tuple[str, subprocess.Popen[bytes]], mixin: str, test_name: str
) -> None:
    url, process = serve_sim
    kit = _kit_mixins()[mixin]
    case_type = type(f"ServeSim{mixin}", (kit, unittest.TestCase), {"base_url": url})
    case = case_type(test_name)
    case.process = process  # type: ignore[attr-defined]
    outcome = unittest.TestResult()
    case.run(outcome)
    problems = [text for _, text in (*outcome.errors, *outcome.failures)]
    assert outcome.testsRun == 1 and not problems, "\n".join(problems)
