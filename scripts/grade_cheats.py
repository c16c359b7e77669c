"""Grade the cheat corpus (tests/envs/swe/cheats.py) with a grader tree, print a Markdown table.

    python scripts/grade_cheats.py [--tree DIR] [--tasks N] [--only NAME,...]

`--tree` is a checkout of the project whose grader to use (default: this one), so an older
grader can be compared on today's corpus (`git worktree add /tmp/old <commit>`). Needs Docker.
Each row is one cheat; the columns are a user's own task brought the docs' first way (a record
plus a local repository, tests/envs/swe/own_repo.py), the same task in an image whose
`install_cmd` installs a pytest plugin, and the first task of each of `--tasks` shipped
projects. A cell is "reward reason".
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=HERE, help="project checkout to grade with")
    parser.add_argument("--tasks", type=int, default=2, help="shipped tasks to grade on")
    parser.add_argument("--only", default="", help="comma-separated cheat names (default: all)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    cheats = _load("cheats", HERE / "tests/envs/swe/cheats.py")
    own_repo = _load("own_repo", HERE / "tests/envs/swe/own_repo.py")
    only = [name for name in args.only.split(",") if name]
    asyncio.run(_grade_all(cheats, own_repo, args.tasks, only))


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


async def _grade_all(
    cheats: ModuleType, own_repo: ModuleType, task_count: int, only: list[str]
) -> None:
    import docker

    from envs.swe.config import GradingConfig
    from envs.swe.grader import AgentPatch, Grader
    from envs.swe.grading_log import parse_pytest_log
    from envs.swe.images import TaskImageConfig, TaskImageResolver
    from envs.swe.runtime import BackendSandboxes
    from envs.swe.tasks import load_shipped_tasks, load_tasks_strict
    from foundation.clock import LoopClock
    from harness.backends import DockerBackend
    from harness.images import ensure_base_image

    client = docker.from_env()
    base = ensure_base_image(client, progress=lambda line: None)
    runtime = BackendSandboxes(DockerBackend(client), TaskImageResolver(TaskImageConfig(), base))
    scratch = Path(tempfile.mkdtemp(prefix="grade-cheats-"))
    own = own_repo.make_own_repo(scratch)
    own_tasks = [
        load_tasks_strict(own.write_tasks(scratch / f"{name}.jsonl", **fields))[0]
        for name, fields in (
            ("own", {"repo_path": str(own.bundle)}),
            ("plugin", {"repo_path": str(own.bundle), "install_cmd": cheats.DEMO_PLUGIN_INSTALL}),
        )
    ]
    shipped = list({task.project: task for task in load_shipped_tasks()}.values())[:task_count]
    tasks = [*own_tasks, *shipped]
    headers = ["own task (way 1)", "own task, plugin installed", *(t.instance_id for t in shipped)]
    config = GradingConfig(test_timeout_s=8, kill_grace_s=1, host_margin_s=20)
    grader = Grader(config, runtime.grading_sandbox, clock=LoopClock(), parse_log=parse_pytest_log)
    names = only or list(cheats.CHEATS)
    rows: dict[str, list[str]] = {}
    for task in tasks:
        await runtime.ensure_image(task)
        for name in names:
            diff = cheats.cheat_patch(task, cheats.CHEATS[name])
            report = await grader.grade(task, AgentPatch(diff.encode("utf-8", "surrogateescape")))
            data = report.to_dict()
            infra = data["infra_error"]
            why = data["invalid_reason"] or (f"infra: {infra['code']}" if infra else "")
            why = why or ("F2P failed" if data["f2p_failed"] else "")
            rows.setdefault(name, []).append(f"{data['reward']:.0f} {why}".strip())
            print(f"{task.instance_id} {name}: {rows[name][-1]}", file=sys.stderr, flush=True)
    print("| cheat | " + " | ".join(headers) + " |")
    print("|---" * (len(headers) + 1) + "|")
    for name, cells in rows.items():
        print(f"| `{name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
