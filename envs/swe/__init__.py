"""The SWE environment: SWE-bench-format tasks, offline task images, bash/editor/submit tools,
test-based rewards with anti-cheat checks, and the shipped offline task set.

Registered with Gymnasium as `conductor/SWE-v0` (call `harness.register_envs()` first).
"""

from envs.swe.config import SWEEnvConfig
from envs.swe.env import SWEEnv, make_swe_env
from envs.swe.grader import AgentPatch, Grader
from envs.swe.grading import GradingReport
from envs.swe.grading_log import parse_pytest_log
from envs.swe.images import TaskImageConfig, TaskImageResolver, build_task_images
from envs.swe.runtime import BackendSandboxes, swe_backend
from envs.swe.tasks import SWETask, load_shipped_tasks, load_tasks, load_tasks_strict

__all__ = [
    "AgentPatch",
    "BackendSandboxes",
    "Grader",
    "GradingReport",
    "SWEEnv",
    "SWEEnvConfig",
    "SWETask",
    "TaskImageConfig",
    "TaskImageResolver",
    "build_task_images",
    "load_shipped_tasks",
    "load_tasks",
    "load_tasks_strict",
    "make_swe_env",
    "parse_pytest_log",
    "swe_backend",
]
