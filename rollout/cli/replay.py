"""`conductor replay RUN_DIR`: check a run's scheduler decisions are reproducible.

Reads RUN_DIR/decisions.jsonl (written by `conductor run` and `conductor simulate` while
`conductor.decision_log` is true, the default), feeds its events through a fresh
`RolloutScheduler` built from the recorded `SchedulerConfig`, and compares the decisions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from rollout.cli.console import console, fail
from rollout.core.decision_log import DecisionLogError, replay_decisions
from rollout.errors import RolloutError
from rollout.observe.run_dir import DECISIONS_FILE

__all__ = ["replay"]


def replay(
    run_dir: Path = typer.Argument(
        ..., help="a run directory holding decisions.jsonl", show_default=False
    ),
) -> None:
    """Replay a run's scheduler events and check the decisions come out identical.

    Feeds every event recorded in RUN_DIR/decisions.jsonl through a fresh scheduler built from
    the recorded scheduler config. Prints "N events, M decisions: identical" and exits 0, or
    the first differing record (line number, expected vs got) and exits 1.
    decisions.jsonl is written by `conductor run` and `conductor simulate` unless
    `conductor.decision_log=false`.
    """
    path = run_dir / DECISIONS_FILE
    if not path.is_file():
        fail(
            f"{path} does not exist: decisions.jsonl is written by `conductor run` and "
            "`conductor simulate` (one run directory per policy) while the config option "
            "conductor.decision_log is true (the default); point at such a run directory"
        )
    try:
        result = replay_decisions(read_numbered_records(path))
    except DecisionLogError as exc:
        fail(f"{path}: {exc}")
    except RolloutError as exc:  # the scheduler refused a recorded event
        fail(f"{path}: replaying raised {type(exc).__name__}: {exc}")
    if result.identical:
        notes = f" ({result.notes} conductor decisions, not replayed)" if result.notes else ""
        console.print(f"{result.events} events, {result.decisions} decisions: identical{notes}")
        return
    console.print(
        f"[bold red]differs[/] at {path}:{result.line} (after {result.events} events)\n"
        f"  expected: {escape(result.expected or '')}\n  got:      {escape(result.got or '')}",
    )
    raise typer.Exit(1)


def read_numbered_records(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """`(line number, object)` per non-blank line; strict: a torn or garbled line (even the
    last) raises `DecisionLogError`, since a replay of a cut log would check too little."""
    with path.open(encoding="utf-8", errors="replace") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DecisionLogError(
                    f"line {number} is not valid JSON ({exc}); the log is truncated or "
                    "corrupted (a run that crashed mid-write?): record the run again"
                ) from exc
            if not isinstance(record, dict):
                raise DecisionLogError(
                    f"line {number} holds a {type(record).__name__}, not an object"
                )
            yield number, record
