"""`conductor bench swe`: the SWE env's infrastructure costs, measured in one run.

Times (1) building every task image from scratch and (2) again from cache, (3) starting a
container from a task image, and (4) grading each task's gold patch in a fresh container,
hardened (launcher, report, canaries: the default) and plain, interleaved task by task so both
see the same machine (and checks each gold patch earns reward 1 either way, so a broken task
cannot hide in a fast number).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import docker
import docker.errors

from envs.swe.config import SWEEnvConfig
from envs.swe.grader import AgentPatch, Grader
from envs.swe.grading_log import parse_pytest_log
from envs.swe.images import TaskImageResolver, build_task_images
from envs.swe.runtime import BackendSandboxes
from envs.swe.tasks import SWETask
from foundation.clock import LoopClock
from harness.backends import DockerBackend

__all__ = ["SWEBenchResult", "run_swe_bench"]


@dataclass(slots=True)
class SWEBenchResult:
    tasks: int = 0
    build_scratch_s: float = 0.0
    build_cached_s: float = 0.0
    container_start_s: list[float] = field(default_factory=list)
    grading_s: list[float] = field(default_factory=list)
    plain_grading_s: list[float] = field(default_factory=list)
    gold_resolved: int = 0
    plain_gold_resolved: int = 0
    failures: list[str] = field(default_factory=list)

    def _hardening_ratios(self) -> list[float]:
        pairs = zip(self.grading_s, self.plain_grading_s, strict=True)
        return [hardened / plain for hardened, plain in pairs]

    def rows(self) -> list[tuple[str, str]]:
        start = self.container_start_s
        return [
            ("tasks", str(self.tasks)),
            ("build all task images, from scratch", f"{self.build_scratch_s:.1f} s"),
            ("build all task images, from cache", f"{self.build_cached_s:.2f} s"),
            ("scratch / cache", f"{self.build_scratch_s / max(self.build_cached_s, 1e-9):.0f}x"),
            (
                f"container start (median of {len(start)})",
                f"{1000 * statistics.median(start):.0f} ms",
            ),
            ("grading per task, hardened (median)", f"{statistics.median(self.grading_s):.2f} s"),
            ("grading per task, hardened (max)", f"{max(self.grading_s):.2f} s"),
            (
                "grading per task, plain (median)",
                f"{statistics.median(self.plain_grading_s):.2f} s",
            ),
            ("grading per task, plain (max)", f"{max(self.plain_grading_s):.2f} s"),
            (
                "hardened / plain (median of per-task ratios)",
                f"{statistics.median(self._hardening_ratios()):.2f}x",
            ),
            ("gold patch resolved, hardened", f"{self.gold_resolved}/{self.tasks}"),
            ("gold patch resolved, plain", f"{self.plain_gold_resolved}/{self.tasks}"),
        ]


async def run_swe_bench(
    client: docker.DockerClient,
    tasks: Sequence[SWETask],
    resolver: TaskImageResolver,
    *,
    container_starts: int = 10,
    progress: Callable[[str], None] = print,
) -> SWEBenchResult:
    result = SWEBenchResult(tasks=len(tasks))
    progress("removing task images to build from scratch")
    for task in tasks:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(resolver.image_for(task), force=True)
    result.build_scratch_s = build_task_images(client, tasks, resolver, progress).seconds
    result.build_cached_s = build_task_images(client, tasks, resolver).seconds

    runtime = BackendSandboxes(DockerBackend(client), resolver)
    progress(f"starting {container_starts} containers")
    for index in range(container_starts):
        started = time.perf_counter()
        sandbox = await runtime.backend.create(resolver.image_for(tasks[index % len(tasks)]))
        result.container_start_s.append(time.perf_counter() - started)
        await sandbox.aclose()

    hardened_config = SWEEnvConfig().grading
    plain_config = hardened_config.model_copy(update={"harden_pytest": False})
    graders = {
        hardened: Grader(
            config, runtime.grading_sandbox, clock=LoopClock(), parse_log=parse_pytest_log
        )
        for hardened, config in ((True, hardened_config), (False, plain_config))
    }
    for index, task in enumerate(tasks, start=1):
        progress(f"grading gold patch {index}/{len(tasks)}")
        order = (True, False) if index % 2 else (False, True)  # alternate who goes first
        for hardened in order:
            started = time.perf_counter()
            report = await graders[hardened].grade(task, AgentPatch(diff=task.patch.encode()))
            seconds = time.perf_counter() - started
            (result.grading_s if hardened else result.plain_grading_s).append(seconds)
            if report.resolved and hardened:
                result.gold_resolved += 1
            elif report.resolved:
                result.plain_gold_resolved += 1
            else:
                result.failures.append(
                    f"{task.instance_id} ({'hardened' if hardened else 'plain'})"
                )
    return result
