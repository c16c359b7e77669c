"""Grade the cheat corpus (tests/envs/swe/cheats.py) with a grader tree, print a Markdown table.

    python scripts/grade_cheats.py [--tree DIR] [--tasks N]

`--tree` is a checkout of the project whose grader to use (default: this one), so an older
grader can be compared on today's corpus (`git worktree add /tmp/old <commit>`). Needs Docker.
Each row is one cheat; each column one shipped task (the first task of each project):
"reward reason".
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=HERE, help="project checkout to grade with")
    parser.add_argument("--tasks", type=int, default=2, help="shipped tasks to grade on")
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    spec = importlib.util.spec_from_file_location("cheats", HERE / "tests/envs/swe/cheats.py")
    assert spec is not None and spec.loader is not None
    cheats = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cheats)
    asyncio.run(_grade_all(cheats, args.tasks))


async def _grade_all(cheats: object, task_count: int) -> None:
    import docker

    from envs.swe.config import GradingConfig
    from envs.swe.grader import AgentPatch, Grader
    from envs.swe.grading_log import parse_pytest_log
    from envs.swe.images import TaskImageConfig, TaskImageResolver
    from envs.swe.runtime import BackendSandboxes
    from envs.swe.tasks import load_shipped_tasks
    from foundation.clock import LoopClock
    from harness.backends import DockerBackend
    from harness.images import ensure_base_image

    client = docker.from_env()
    base = ensure_base_image(client, progress=lambda line: None)
    runtime = BackendSandboxes(DockerBackend(client), TaskImageResolver(TaskImageConfig(), base))
    tasks = list({task.project: task for task in load_shipped_tasks()}.values())[:task_count]
    config = GradingConfig(test_timeout_s=8, kill_grace_s=1, host_margin_s=20)
    grader = Grader(config, runtime.grading_sandbox, clock=LoopClock(), parse_log=parse_pytest_log)
    rows: dict[str, list[str]] = {}
    for task in tasks:
        await runtime.ensure_image(task)
        for name, cheat in cheats.CHEATS.items():  # type: ignore[attr-defined]
            diff = cheats.cheat_patch(task, cheat)  # type: ignore[attr-defined]
            report = await grader.grade(task, AgentPatch(diff.encode("utf-8", "surrogateescape")))
            data = report.to_dict()
            infra = data["infra_error"]
            why = data["invalid_reason"] or (f"infra: {infra['code']}" if infra else "")
            why = why or ("F2P failed" if data["f2p_failed"] else "")
            rows.setdefault(name, []).append(f"{data['reward']:.0f} {why}".strip())
    print("| cheat | " + " | ".join(task.instance_id for task in tasks) + " |")
    print("|---" * (len(tasks) + 1) + "|")
    for name, cells in rows.items():
        print(f"| `{name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
