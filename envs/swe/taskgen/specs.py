"""Curated task specs: per project, the bugs to inject and the issue text for each.

One YAML file per project under `<taskset>/specs/<project>.yaml`::

    project: spans                  # directory under <taskset>/projects/
    repo: swe-taskset/spans         # owner/name; instance ids are owner__name-<task id>
    version: "1.2"
    created_at: "2026-11-30T00:00:00Z"
    tasks:
      - id: touching-overlap
        mutation: {path: spans/interval.py, function: Interval.overlaps,
                   kind: boundary_shift, occurrence: 0}
        problem_statement: |
          ...
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from envs.swe.taskgen.mutations import MutationKind, MutationTarget
from foundation.config import FrozenConfig, load_config

__all__ = ["MutationSpec", "ProjectSpec", "TaskSpec", "load_project_spec", "load_specs"]

_SLUG = r"^[a-z0-9][a-z0-9-]*$"


class MutationSpec(FrozenConfig):
    """Where and how to inject the bug (see `envs.swe.taskgen.mutations`)."""

    path: str = Field(description="File relative to the project root, POSIX separators.")
    function: str = Field(default="", description="Qualified function name; empty: the module.")
    kind: MutationKind = Field(description="The kind of bug.")
    occurrence: int = Field(default=0, ge=0, description="Index among the kind's sites, from 0.")
    replacement: str | None = Field(
        default=None, description="New text where the kind allows one; None: the kind's default."
    )

    def target(self) -> MutationTarget:
        return MutationTarget(
            path=self.path,
            function=self.function,
            kind=self.kind,
            occurrence=self.occurrence,
            replacement=self.replacement,
        )


class TaskSpec(FrozenConfig):
    """One task: a bug and the issue a user would file about it."""

    id: str = Field(pattern=_SLUG, description="Task id, unique in the project (kebab-case).")
    mutation: MutationSpec
    problem_statement: str = Field(
        min_length=80, description="The issue: symptom, reproduction, expected vs actual."
    )
    hints_text: str = Field(default="", description="Optional extra hints (issue comments).")


class ProjectSpec(FrozenConfig):
    """All tasks made from one project."""

    project: str = Field(pattern=_SLUG, description="Directory name under `projects/`.")
    repo: str = Field(
        pattern=r"^[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9-]*$", description="owner/name of the repo."
    )
    version: str = Field(min_length=1, description="Environment version shared by the tasks.")
    created_at: str = Field(
        description="ISO 8601 time stamped on every task (fixed: reproducible)."
    )
    tasks: tuple[TaskSpec, ...] = Field(min_length=1)

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, tasks: tuple[TaskSpec, ...]) -> tuple[TaskSpec, ...]:
        seen: set[str] = set()
        for task in tasks:
            if task.id in seen:
                raise ValueError(f"task id {task.id!r} appears twice; ids must be unique")
            seen.add(task.id)
        return tasks

    def instance_id(self, task: TaskSpec) -> str:
        """`owner__name-<task id>`, the SWE-bench id scheme."""
        owner, name = self.repo.split("/")
        return f"{owner}__{name}-{task.id}"


def load_project_spec(path: str | Path) -> ProjectSpec:
    """Read and validate one spec file (errors name the field and the file)."""
    return load_config(ProjectSpec, path)


def load_specs(specs_dir: str | Path, projects: tuple[str, ...] = ()) -> list[ProjectSpec]:
    """All spec files in `specs_dir` (sorted by project), or only those of `projects`.

    Raises:
        FileNotFoundError: the directory holds no spec, or a requested project has none.
    """
    paths = sorted(Path(specs_dir).glob("*.yaml"))
    specs = [load_project_spec(path) for path in paths]
    if not specs:
        raise FileNotFoundError(f"no *.yaml task specs in {specs_dir}")
    if projects:
        known = {spec.project for spec in specs}
        missing = sorted(set(projects) - known)
        if missing:
            raise FileNotFoundError(
                f"no spec for project(s) {', '.join(missing)} in {specs_dir}; "
                f"known: {', '.join(sorted(known))}"
            )
        specs = [spec for spec in specs if spec.project in projects]
    return sorted(specs, key=lambda spec: spec.project)
