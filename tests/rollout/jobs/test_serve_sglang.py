"""`conductor serve-sglang`: the flags the rollout adds, and the ones it refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollout.jobs.serve_sglang import ServeSGLangError, installed_sglang, launch_plan
from tests.paths import REPO_ROOT

MODEL = ["--model-path", "/models/qwen3-8b"]


def plan(*args: str, kv_backend: str = "default", host_tier: bool = True):  # type: ignore[no-untyped-def]
    return launch_plan([*MODEL, *args], python="py", kv_backend=kv_backend, host_tier=host_tier)  # type: ignore[arg-type]


def test_the_rollouts_flags_are_added_after_the_users() -> None:
    launch = plan("--tp", "2")
    assert launch.argv[:3] == ("py", "-m", "sglang.launch_server")
    assert launch.argv[3:7] == (*MODEL, "--tp", "2")
    assert launch.added_flags == (
        "--enable-priority-scheduling",
        "--priority-scheduling-preemption-threshold", "0",
        "--schedule-policy", "fcfs",
        "--enable-metrics",
        "--page-size", "64",
        "--enable-hierarchical-cache",
        "--hicache-write-policy", "write_through",
    )  # fmt: skip
    assert launch.env == {}


def test_flags_the_user_gave_are_not_repeated() -> None:
    launch = plan("--page-size", "16", "--enable-metrics", host_tier=False)
    assert "--page-size" not in launch.added_flags and "--enable-metrics" not in launch.added_flags
    assert "--enable-hierarchical-cache" not in launch.added_flags


def test_the_agentkv_backend_sets_its_flag_and_environment() -> None:
    launch = launch_plan(
        MODEL, python="py", kv_backend="agentkv", host_tier=True, agentkv_config="/c.yaml"
    )
    assert launch.added_flags[-2:] == ("--radix-cache-backend", "agentkv")
    assert launch.env == {"SGLANG_PLUGINS": "agentkv", "AGENTKV_CONFIG": "/c.yaml"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--disable-radix-cache"], "re-prefill"),
        (["--schedule-low-priority-values-first"], "urgent"),
        (["--disable-priority-preemption"], "preempt"),
        (["--schedule-policy", "lpm"], "fcfs or lof"),
        (["--priority-scheduling-preemption-threshold=10"], "only 0"),
        (["--radix-cache-backend", "mine"], "sets the backend itself"),
    ],
)
def test_flags_that_would_defeat_the_rollout_are_refused(args: list[str], message: str) -> None:
    with pytest.raises(ServeSGLangError, match=message):
        plan(*args)


def test_a_model_is_required() -> None:
    with pytest.raises(ServeSGLangError, match="--model-path"):
        launch_plan([], python="py", kv_backend="default", host_tier=True)


def test_the_probe_reports_no_sglang_and_this_projects_plugin_in_the_main_venv() -> None:
    version, plugins = installed_sglang(sys.executable)
    assert version is None and "agentkv" in plugins  # declared by this project's entry points


SGLANG_PYTHON = REPO_ROOT / ".venv-sglang" / "bin" / "python"
REQUIRE_SGLANG = os.environ.get("CONDUCTOR_REQUIRE_SGLANG") == "1"


def _sglang_python() -> Path:
    if not SGLANG_PYTHON.exists():
        if REQUIRE_SGLANG:
            pytest.fail("CONDUCTOR_REQUIRE_SGLANG=1 but there is no .venv-sglang")
        pytest.skip("no .venv-sglang; run `make venv-sglang`")
    return SGLANG_PYTHON


@pytest.mark.slow
def test_sglangs_own_argument_parser_accepts_the_launch_command() -> None:
    python = _sglang_python()
    version, _ = installed_sglang(str(python))
    assert version == "0.5.23"
    launch = launch_plan(
        ["--model-path", "/models/none", "--device", "cpu"],
        python=str(python),
        kv_backend="default",
        host_tier=True,
    )
    check = (
        "import sys\n"
        "from sglang.srt.server_args import prepare_server_args\n"
        "a = prepare_server_args(sys.argv[1:])\n"
        "print(a.enable_priority_scheduling, a.priority_scheduling_preemption_threshold,\n"
        "      a.schedule_policy, a.enable_metrics, a.page_size, a.hicache_write_policy)\n"
    )
    done = subprocess.run(
        [str(python), "-c", check, *launch.argv[3:]],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "0", "fcfs", "True", "64", "write_through"]
