"""SGLang's own HTTP test kits (from the 0.5.23 wheel) against `conductor serve-sim`.

The kits are unittest mixins that need only `base_url` and `process` (`sglang/test/kits/`):
`basic_api_contract_kit`, `pause_generation_kit` and `abort_timeout_kit`. Their files are read
from the wheel that `make sglang-wheel` caches under `.cache/sglang/` (no install: they import
only `requests`), and each kit test runs as its own pytest test against a serve-sim process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import types
import unittest
import zipfile
from collections.abc import Iterator

import pytest
import requests

from rollout.jobs.serve_sim import spawn_serve_sim
from tests.paths import CONFIGS, REPO_ROOT

SERVE_SIM_CONFIG = CONFIGS / "serve_sim" / "default.yaml"

WHEELS = sorted((REPO_ROOT / ".cache" / "sglang").glob("sglang-0.5.23-*.whl"))
REQUIRED = os.environ.get("CONDUCTOR_REQUIRE_SGLANG_KITS") == "1"
KITS = {
    "basic_api_contract_kit": ["BasicAPIContractMixin"],
    "pause_generation_kit": ["PauseResumeInPlaceMixin"],
    "abort_timeout_kit": ["AbortAllMixin", "WaitingTimeoutMixin", "RunningTimeoutTwoWaveMixin"],
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


# The kits' own server settings: "--max-running-requests=1" with SGLANG_REQ_WAITING_TIMEOUT, and
# SGLANG_REQ_RUNNING_TIMEOUT, as serve-sim's config fields.
ENGINE = (
    "schedule_policy=priority, priority_preemption=true, preemption_threshold=0, "
    "kv_backend=kvcache, max_running_requests=1"
)
TIMEOUT_SERVERS = {
    "test_waiting_timeout": ["waiting_timeout_s=1", f"engine.overrides=[{ENGINE}]"],
    "test_running_timeout_no_crash": ["running_timeout_s=2"],
}


@pytest.fixture(scope="module")
def serve_sim() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`conductor serve-sim` in its own process, as the kits expect a server process."""
    with _serving([]) as served:
        yield served


@contextlib.contextmanager
def _serving(overrides: list[str]) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    url, process = spawn_serve_sim(overrides, config=SERVE_SIM_CONFIG)
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


def _run_kit_test(mixin: str, test_name: str, url: str, process: subprocess.Popen[bytes]) -> None:
    kit = _kit_mixins()[mixin]
    case_type = type(f"ServeSim{mixin}", (kit, unittest.TestCase), {"base_url": url})
    case = case_type(test_name)
    case.process = process  # type: ignore[attr-defined]
    outcome = unittest.TestResult()
    case.run(outcome)
    problems = [text for _, text in (*outcome.errors, *outcome.failures)]
    assert outcome.testsRun == 1 and not problems, "\n".join(problems)


@pytest.mark.parametrize(("mixin", "test_name"), KIT_TESTS)
def test_sglang_http_kit_passes_against_serve_sim(
    serve_sim: tuple[str, subprocess.Popen[bytes]], mixin: str, test_name: str
) -> None:
    _run_kit_test(mixin, test_name, *serve_sim)


@pytest.mark.parametrize(
    ("mixin", "test_name"),
    [("WaitingTimeoutMixin", "test_waiting_timeout"),
     ("RunningTimeoutTwoWaveMixin", "test_running_timeout_no_crash")],
)  # fmt: skip
def test_sglang_timeout_kit_passes_against_serve_sim_with_its_timeouts(
    mixin: str, test_name: str
) -> None:
    _kit_mixins()  # skips (or fails in CI) without the wheel, before starting a server
    with _serving(TIMEOUT_SERVERS[test_name]) as (url, process):
        _run_kit_test(mixin, test_name, url, process)
