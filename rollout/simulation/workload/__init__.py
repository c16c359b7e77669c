"""Synthetic agentic workload: hidden per-sample scripts, a simulated env, a scripted token model.

Drawn from shared/reference/perf-model.md §5 and §9.4. Start from `SyntheticWorkload`.
"""

from rollout.simulation.workload.book import ScriptBook
from rollout.simulation.workload.config import LengthSpec, ToolKindConfig, WorkloadConfig
from rollout.simulation.workload.context_stats import ContextStats, context_stats
from rollout.simulation.workload.corpus import TokenCorpus
from rollout.simulation.workload.script import (
    SUBMIT_TOOL,
    SampleScript,
    TurnScript,
    draw_group,
    session_id_of,
)
from rollout.simulation.workload.sim_env import SimEnv, StepResult
from rollout.simulation.workload.token_model import RoutedTokenModel, ScriptedTokenModel
from rollout.simulation.workload.workload import SyntheticWorkload

__all__ = [
    "SUBMIT_TOOL",
    "ContextStats",
    "LengthSpec",
    "RoutedTokenModel",
    "SampleScript",
    "ScriptBook",
    "ScriptedTokenModel",
    "SimEnv",
    "StepResult",
    "SyntheticWorkload",
    "TokenCorpus",
    "ToolKindConfig",
    "TurnScript",
    "WorkloadConfig",
    "context_stats",
    "draw_group",
    "session_id_of",
]
