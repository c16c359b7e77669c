"""Synthetic agentic workload: hidden per-sample scripts, a simulated env, a scripted token model.

Drawn from shared/reference/perf-model.md §5 and §9.4. Start from `SyntheticWorkload`.
"""

from rollout.sim.workload.book import ScriptBook
from rollout.sim.workload.config import LengthSpec, ToolSpec, WorkloadConfig
from rollout.sim.workload.corpus import TokenCorpus
from rollout.sim.workload.script import (
    SUBMIT_TOOL,
    SampleScript,
    TurnScript,
    draw_group,
    session_id_of,
)
from rollout.sim.workload.sim_env import SimEnv, StepResult
from rollout.sim.workload.token_model import RoutedTokenModel, ScriptedTokenModel
from rollout.sim.workload.workload import SyntheticWorkload

__all__ = [
    "SUBMIT_TOOL",
    "LengthSpec",
    "RoutedTokenModel",
    "SampleScript",
    "ScriptBook",
    "ScriptedTokenModel",
    "SimEnv",
    "StepResult",
    "SyntheticWorkload",
    "TokenCorpus",
    "ToolSpec",
    "TurnScript",
    "WorkloadConfig",
    "draw_group",
    "session_id_of",
]
