"""The task generator's settings: how tests are run on the host while generating and verifying."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from envs.swe.tasks import DEFAULT_TEST_CMD
from foundation.config import FrozenConfig

__all__ = ["DEFAULT_CONFIG_PATH", "TaskGenConfig"]

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent / "taskgen.yaml"
"""The shipped defaults, `envs/swe/taskgen/taskgen.yaml`."""


class TaskGenConfig(FrozenConfig):
    """How `python -m envs.swe.taskgen` runs test suites on the host."""

    python: str = Field(
        default="",
        description="Interpreter (with pytest) that runs the suites; empty: the one running "
        "the generator. It replaces a leading `python3` of `test_cmd`.",
    )
    test_cmd: str = Field(
        default=DEFAULT_TEST_CMD,
        min_length=1,
        description="Test command stored in every task and run at the repo root (test files "
        "are appended).",
    )
    install_cmd: str = Field(
        default="", description="Install command stored in every task; empty: none needed."
    )
    test_timeout_s: float = Field(
        default=120.0, gt=0, description="Wall-clock limit of one suite run, seconds."
    )
    isolate_plugins: bool = Field(
        default=True,
        description="Run pytest without auto-loaded plugins, like a bare Debian python3-pytest.",
    )
    workers: int = Field(
        default=2, ge=1, description="Suites run in parallel (each is one process), count."
    )
