"""Is a run directory whole? Torn lines and groups the steps name but no trajectory holds.

A crash mid-write leaves a partial last line, which the readers skip; a copied or truncated
`trajectories.jsonl` loses groups that `steps.jsonl` says were consumed. Either way the report
would show numbers computed from less data than the run produced, so `conductor report` counts
both, says so, and writes the counts into metrics.json.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RunIntegrity", "assess_integrity", "torn_tail"]


@dataclass(frozen=True, slots=True)
class RunIntegrity:
    """What is missing from a run directory. `warnings` is empty for a whole one."""

    torn_files: tuple[str, ...]
    groups_in_steps: int
    groups_in_trajectories: int | None
    missing_groups: tuple[str, ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        found = [
            f"{name} ends in a partial line (a crash mid-write); that record was skipped"
            for name in self.torn_files
        ]
        if self.missing_groups:
            shown = ", ".join(self.missing_groups[:5])
            more = (
                f" and {len(self.missing_groups) - 5} more" if len(self.missing_groups) > 5 else ""
            )
            found.append(
                f"{len(self.missing_groups)} of {self.groups_in_steps} consumed groups have no "
                f"trajectories in trajectories.jsonl ({shown}{more}): figures computed from "
                "trajectories cover only the rest"
            )
        return tuple(found)

    def to_dict(self) -> dict[str, Any]:
        return {
            "torn_files": list(self.torn_files),
            "groups_in_steps": self.groups_in_steps,
            "groups_in_trajectories": self.groups_in_trajectories,
            "missing_groups": len(self.missing_groups),
            "warnings": list(self.warnings),
        }


def torn_tail(path: Path) -> bool:
    """Whether a non-empty file does not end with a newline."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with path.open("rb") as file:
        file.seek(-1, 2)
        return file.read(1) != b"\n"


def assess_integrity(
    files: Iterable[Path],
    consumed_groups: Sequence[str],
    trajectory_groups: Iterable[str] | None,
) -> RunIntegrity:
    """Torn `files`, and `consumed_groups` absent from `trajectory_groups` (None: no file)."""
    present = None if trajectory_groups is None else set(trajectory_groups)
    missing = () if present is None else tuple(g for g in consumed_groups if g not in present)
    return RunIntegrity(
        torn_files=tuple(path.name for path in files if torn_tail(path)),
        groups_in_steps=len(consumed_groups),
        groups_in_trajectories=None if present is None else len(present),
        missing_groups=missing,
    )
