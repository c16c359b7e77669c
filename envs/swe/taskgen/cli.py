"""Command line of the task generator: `generate`, `verify` and `sites`.

python -m envs.swe.taskgen generate [--out envs/swe/taskset/tasks.jsonl] [--project NAME]
python -m envs.swe.taskgen verify [--tasks envs/swe/taskset/tasks.jsonl] [--instance ID]
python -m envs.swe.taskgen sites PROJECT FILE [--function NAME] [--kind KIND]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table

from envs.swe.taskgen.config import DEFAULT_CONFIG_PATH, TaskGenConfig
from envs.swe.taskgen.generator import TaskGenError, TaskOutcome, generate_project
from envs.swe.taskgen.mutations import MutationError, MutationKind, find_sites, function_names
from envs.swe.taskgen.project_files import read_project
from envs.swe.taskgen.specs import load_specs
from envs.swe.taskgen.verify import TaskVerdict, verify_task
from envs.swe.tasks import (
    SHIPPED_TASKSET_DIR,
    SWETask,
    dump_tasks_jsonl,
    load_tasks_strict,
)
from foundation.config import load_config

__all__ = ["build_app", "main"]

_T = TypeVar("_T")
_R = TypeVar("_R")

TasksetOption = Annotated[
    Path, typer.Option(help="Task set directory (holds projects/ and specs/).")
]
ConfigOption = Annotated[Path, typer.Option(help="TaskGenConfig YAML file.")]


def build_app() -> typer.Typer:
    """The typer application (built on call: no import-time state)."""
    app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
    app.command()(generate)
    app.command()(verify)
    app.command()(sites)
    return app


def main() -> None:
    build_app()()


def generate(
    out: Annotated[
        Path | None, typer.Option(help="JSONL to write; default: <taskset>/tasks.jsonl.")
    ] = None,
    taskset: TasksetOption = SHIPPED_TASKSET_DIR,
    project: Annotated[
        list[str] | None,
        typer.Option(help="Regenerate only this project (repeatable); others in --out are kept."),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Generate tasks from the specs; exit 1 if a spec is rejected (the rest is still written)."""
    settings = load_config(TaskGenConfig, config)
    out_path = out if out is not None else taskset / "tasks.jsonl"
    specs = load_specs(taskset / "specs", tuple(project or ()))
    console = Console(stderr=True)
    outcomes: list[TaskOutcome] = []
    with _progress(console) as progress:
        bar = progress.add_task("generating", total=sum(len(spec.tasks) for spec in specs))
        for spec in specs:
            progress.update(bar, description=f"generating {spec.project}")
            try:
                outcomes += generate_project(
                    spec, taskset, settings, on_outcome=lambda _: progress.advance(bar)
                )
            except TaskGenError as exc:
                console.print(f"[red]{escape(str(exc))}[/red]")
                raise typer.Exit(code=2) from exc
    tasks = [outcome.task for outcome in outcomes if outcome.task is not None]
    kept = _tasks_of_other_projects(out_path, {spec.project for spec in specs}) if project else []
    ordered = sorted([*kept, *tasks], key=lambda task: task.project or "")
    out_path.write_text(dump_tasks_jsonl(ordered), encoding="utf-8")
    Console().print(_generation_table(outcomes))
    rejected = [outcome for outcome in outcomes if outcome.task is None]
    console.print(f"wrote {len(ordered)} task(s) to {out_path}; {len(rejected)} spec(s) rejected")
    for outcome in rejected:
        console.print(
            f"[red]rejected {outcome.instance_id}:[/red] {escape(outcome.rejection or '')}"
        )
    if rejected:
        raise typer.Exit(code=1)


def verify(
    tasks: Annotated[
        Path | None, typer.Option(help="Task file; default: <taskset>/tasks.jsonl.")
    ] = None,
    taskset: TasksetOption = SHIPPED_TASKSET_DIR,
    instance: Annotated[
        list[str] | None, typer.Option(help="Verify only this instance id (repeatable).")
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG_PATH,
) -> None:
    """Check gold patch -> all F2P/P2P pass and empty patch -> some F2P fails; exit 1 on failure."""
    settings = load_config(TaskGenConfig, config)
    loaded = load_tasks_strict(tasks if tasks is not None else taskset / "tasks.jsonl")
    selected = [task for task in loaded if not instance or task.instance_id in instance]
    unknown = sorted(set(instance or ()) - {task.instance_id for task in loaded})
    if unknown:
        raise typer.BadParameter(f"unknown instance id(s): {', '.join(unknown)}")
    console = Console(stderr=True)
    with _progress(console) as progress:
        bar = progress.add_task("verifying", total=len(selected))

        def one(task: SWETask) -> TaskVerdict:
            verdict = verify_task(task, settings, taskset)
            progress.advance(bar)
            return verdict

        verdicts = _map_in_threads(one, selected, settings.workers)
    Console().print(_verification_table(selected, verdicts))
    failed = [verdict for verdict in verdicts if not verdict.ok]
    console.print(f"{len(verdicts) - len(failed)}/{len(verdicts)} task(s) verified")
    for verdict in failed:
        console.print(f"[red]{verdict.instance_id}:[/red] {escape('; '.join(verdict.problems))}")
    if failed:
        raise typer.Exit(code=1)


def sites(
    project: Annotated[str, typer.Argument(help="Project directory name under projects/.")],
    file: Annotated[str, typer.Argument(help="Source file relative to the project root.")],
    function: Annotated[str, typer.Option(help="Qualified function name; empty: module.")] = "",
    kind: Annotated[list[MutationKind] | None, typer.Option(help="Only this kind.")] = None,
    taskset: TasksetOption = SHIPPED_TASKSET_DIR,
) -> None:
    """List mutation sites (with their occurrence index) to write a spec."""
    files = read_project(taskset / "projects" / project)
    if file not in files:
        raise typer.BadParameter(f"{file} is not in project {project}")
    source = files[file]
    table = Table("kind", "site", title=f"{project}/{file} {function or '<module>'}")
    for mutation_kind in kind or list(MutationKind):
        try:
            found = find_sites(source, function, mutation_kind)
        except MutationError as exc:
            table.add_row(str(mutation_kind), f"[red]{escape(str(exc))}[/red]")
            continue
        for site in found:
            table.add_row(str(mutation_kind), escape(site.describe()))
    Console().print(table)
    if not function:
        Console().print("functions: " + ", ".join(function_names(source)))


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def _map_in_threads(function: Callable[[_T], _R], items: Iterable[_T], workers: int) -> list[_R]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, items))


def _tasks_of_other_projects(path: Path, regenerated: set[str]) -> list[SWETask]:
    if not path.exists():
        return []
    return [task for task in load_tasks_strict(path) if task.project not in regenerated]


def _instance_column() -> Column:
    return Column("instance", overflow="fold")


def _generation_table(outcomes: list[TaskOutcome]) -> Table:
    table = Table(_instance_column(), "kind", "F2P", "P2P", "result", title="generated tasks")
    for outcome in outcomes:
        task = outcome.task
        table.add_row(
            outcome.instance_id,
            str(outcome.kind),
            str(len(task.FAIL_TO_PASS)) if task else "-",
            str(len(task.PASS_TO_PASS)) if task else "-",
            "[green]ok[/green]" if task else "[red]rejected[/red]",
        )
    return table


def _verification_table(tasks: list[SWETask], verdicts: list[TaskVerdict]) -> Table:
    table = Table(
        _instance_column(),
        "F2P fail w/o fix",
        "F2P pass w/ fix",
        "P2P pass w/ fix",
        "result",
        title="verified tasks",
    )
    for task, verdict in zip(tasks, verdicts, strict=True):
        table.add_row(
            task.instance_id,
            f"{verdict.f2p_failing_without_fix}/{len(task.FAIL_TO_PASS)}",
            f"{verdict.f2p_passing_with_fix}/{len(task.FAIL_TO_PASS)}",
            f"{verdict.p2p_passing_with_fix}/{len(task.PASS_TO_PASS)}",
            "[green]ok[/green]" if verdict.ok else "[red]FAILED[/red]",
        )
    return table
