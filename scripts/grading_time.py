"""Grading time per task, side by side: the gold patch of every shipped task graded by several
grader variants, interleaved task by task (the order rotates), each grading in a child process
of its variant's tree. Prints a Markdown table. Needs Docker and the task images
(`conductor images build --tasks envs/swe/taskset/tasks.jsonl`).

    python scripts/grading_time.py --variant before=/tmp/old --variant after=. \\
        --variant after-one-verdict=.:second_verdict=false [--tasks N]

A variant is `label=TREE[:field=value,...]`: a project checkout and overrides of its
`GradingConfig` (the default grading config of `SWEEnvConfig` otherwise). Each cell times
`Grader.grade` alone (container starts included, process start and imports not).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

_CHILD = """
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
import docker
from envs.swe.config import SWEEnvConfig
from envs.swe.grader import AgentPatch, Grader
from envs.swe.grading_log import parse_pytest_log
from envs.swe.images import TaskImageConfig, TaskImageResolver
from envs.swe.runtime import BackendSandboxes
from envs.swe.tasks import load_shipped_tasks
from harness.backends import DockerBackend
from foundation.clock import LoopClock
from harness.images import ensure_base_image

async def main():
    overrides = json.loads(sys.argv[3])
    task = next(t for t in load_shipped_tasks() if t.instance_id == sys.argv[2])
    client = docker.from_env()
    base = ensure_base_image(client, progress=lambda line: None)
    runtime = BackendSandboxes(DockerBackend(client), TaskImageResolver(TaskImageConfig(), base))
    await runtime.ensure_image(task)
    config = SWEEnvConfig().grading.model_copy(update=overrides)
    grader = Grader(config, runtime.grading_sandbox, clock=LoopClock(), parse_log=parse_pytest_log)
    started = time.perf_counter()
    report = await grader.grade(task, AgentPatch(task.patch.encode()))
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "resolved": report.resolved,
                      "reason": report.invalid_reason or report.to_dict()["infra_error"]}))

asyncio.run(main())
"""


@dataclass
class Variant:
    label: str
    tree: Path
    overrides: dict[str, object]
    seconds: list[float] = field(default_factory=list)
    resolved: int = 0
    failures: list[str] = field(default_factory=list)


def parse_variant(text: str) -> Variant:
    label, _, rest = text.partition("=")
    tree, _, settings = rest.partition(":")
    if not label or not tree:
        raise argparse.ArgumentTypeError(f"expected label=TREE[:field=value,...], got {text!r}")
    overrides: dict[str, object] = {}
    for setting in filter(None, settings.split(",")):
        name, _, value = setting.partition("=")
        overrides[name] = json.loads(value)
    return Variant(label, Path(tree).resolve(), overrides)


def grade_once(variant: Variant, instance_id: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(variant.tree), instance_id,
         json.dumps(variant.overrides)],
        capture_output=True, text=True, check=False, timeout=600, cwd=variant.tree,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{variant.label} on {instance_id} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", type=parse_variant, action="append", required=True)
    parser.add_argument("--tasks", type=int, default=0, help="first N shipped tasks (0: all)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from envs.swe.tasks import load_shipped_tasks

    tasks = load_shipped_tasks()
    tasks = tasks[: args.tasks] if args.tasks else tasks
    variants: list[Variant] = args.variant
    for index, task in enumerate(tasks):
        shift = index % len(variants)  # who goes first rotates
        for variant in variants[shift:] + variants[:shift]:
            result = grade_once(variant, task.instance_id)
            variant.seconds.append(float(result["seconds"]))  # type: ignore[arg-type]
            if result["resolved"]:
                variant.resolved += 1
            else:
                variant.failures.append(f"{task.instance_id}: {result['reason']}")
            print(f"{index + 1}/{len(tasks)} {variant.label}: {result}", file=sys.stderr)
    first = variants[0]
    print("| variant | median s | max s | ratio to " + first.label + " (median of per-task) "
          "| gold resolved |")  # fmt: skip
    print("|---|---|---|---|---|")
    for variant in variants:
        ratios = [
            mine / theirs for mine, theirs in zip(variant.seconds, first.seconds, strict=True)
        ]
        print(
            f"| {variant.label} | {statistics.median(variant.seconds):.2f} | "
            f"{max(variant.seconds):.2f} | {statistics.median(ratios):.2f}x | "
            f"{variant.resolved}/{len(tasks)} |"
        )
    for variant in variants:
        for failure in variant.failures:
            print(f"- {variant.label} did not resolve {failure}")


if __name__ == "__main__":
    main()
