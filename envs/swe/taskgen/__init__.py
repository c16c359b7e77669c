"""Offline SWE task generation: inject bugs into small projects, derive tests, write tasks.

Public API: the mutation engine (`mutate_source`, `MutationTarget`, `MutationKind`), the
generator (`generate_project`), verification (`verify_task`) and `materialize_repo`, which
builds a task's repository at its `base_commit` for image builders.
"""

from envs.swe.taskgen.config import TaskGenConfig
from envs.swe.taskgen.generator import TaskGenError, TaskOutcome, generate_project
from envs.swe.taskgen.mutations import (
    Mutation,
    MutationError,
    MutationKind,
    MutationTarget,
    find_sites,
    mutate_source,
)
from envs.swe.taskgen.snapshot import SnapshotError, materialize_repo, snapshot_commit
from envs.swe.taskgen.specs import ProjectSpec, TaskSpec, load_specs
from envs.swe.taskgen.verify import TaskVerdict, verify_task

__all__ = [
    "Mutation",
    "MutationError",
    "MutationKind",
    "MutationTarget",
    "ProjectSpec",
    "SnapshotError",
    "TaskGenConfig",
    "TaskGenError",
    "TaskOutcome",
    "TaskSpec",
    "TaskVerdict",
    "find_sites",
    "generate_project",
    "load_specs",
    "materialize_repo",
    "mutate_source",
    "snapshot_commit",
    "verify_task",
]
