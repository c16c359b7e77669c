"""One test run in a grading sandbox whose tree the grader has prepared (I/O; `grader.py` drives).

* `probe_pytest` (hardened runs, on the pristine tree): the launcher's `--probe` says which
  configuration file and root directory pytest picks; the file's bytes are kept on the host, so
  nothing the agent's patch does later can change them.
* `run_tests`: for a pytest command, the canaries are injected into the task's test files, the
  launcher, its spec and the pristine configuration copy are written to a fresh nonce-named
  directory, and the command runs through the launcher; any other command runs as written. Then
  the log, the launcher's report and the pass canary's digest are read back into
  `GradingInputs` for `grading.grade`.

A failed step is an infra error only when the sandbox died (`require_alive`).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, replace
from importlib import resources

from envs.swe.canary import Canary, canary_host_files, plan_canaries
from envs.swe.config import GradingConfig
from envs.swe.grading import GradableTask, GradingInputs, InfraError, paths_in_patch
from envs.swe.grading_scripts import (
    PROBE_STATUS_PREFIX,
    LaunchPaths,
    prepare_tests_script,
    probe_script,
    test_run_script,
)
from envs.swe.pytest_probe import PytestProbe, launch_spec, parse_probe
from envs.swe.run_report import parse_run_report
from envs.swe.test_command import PytestCommand, parse_pytest_command
from harness.sandbox.base import Sandbox

__all__ = [
    "SandboxDied",
    "Staged",
    "probe_pytest",
    "read_optional",
    "require_alive",
    "run_tests",
    "stage",
    "task_test_files",
    "write_path_list",
]

_LAUNCHER = resources.files("envs.swe.grading_assets").joinpath("launch_pytest.py").read_bytes()


class SandboxDied(Exception):
    """A step failed because its sandbox is gone: an infrastructure failure."""


@dataclass(frozen=True, slots=True)
class Staged:
    """What the grader writes into a fresh sandbox before anything else: `test_patch` and, for a
    hardened pytest command, the launcher, in a directory named by the grading's nonce (the
    patch, applied later, cannot know where they are). Its runs write their outputs there too."""

    directory: str
    nonce: str
    test_patch: str
    launcher: str | None


async def stage(sandbox: Sandbox, task: GradableTask, config: GradingConfig, nonce: str) -> Staged:
    directory = f"{config.scratch_dir}/{nonce}"
    test_patch = f"{directory}/test.patch"
    await sandbox.write_file(test_patch, task.test_patch.encode("utf-8"))
    launcher = None
    if _pytest_command(task, config) is not None:
        launcher = f"{directory}/launch_pytest.py"
        await sandbox.write_file(launcher, _LAUNCHER)
    return Staged(directory, nonce, test_patch, launcher)


async def probe_pytest(
    sandbox: Sandbox, task: GradableTask, config: GradingConfig, staged: Staged
) -> PytestProbe | InfraError | None:
    """The pristine configuration of the task's pytest command, read before the agent's patch
    is applied (with `test_patch` applied for the probe, then taken off again). None: not a
    pytest command, hardening off, or the probe failed (the run then reads the repository's
    configuration, guarded only by the path and section checks)."""
    command = _pytest_command(task, config)
    if command is None or staged.launcher is None:
        return None
    out, copy = f"{staged.directory}/probe.json", f"{staged.directory}/ini"
    prepare = prepare_tests_script(task.base_commit, task_test_files(task), staged.test_patch)
    script = probe_script(
        prepare, staged.test_patch, task.test_env_setup, command, staged.launcher, out, copy,
        config,
    )  # fmt: skip
    ran = await sandbox.exec(
        script, timeout_s=config.probe_timeout_s + config.kill_grace_s + config.git_timeout_s
    )
    status = re.findall(rf"{PROBE_STATUS_PREFIX}(\d+)", ran.output)
    if ran.exit_code != 0 or not status:
        await require_alive(sandbox, "probing pytest's configuration")
        message = f"test_patch did not apply: {ran.output[-500:]}"
        return InfraError("test_patch_failed", message)
    if status[-1] != "0":
        return None
    raw = await read_optional(sandbox, out)
    ini = await read_optional(sandbox, copy)
    return None if raw is None else parse_probe(raw, ini)


async def run_tests(
    sandbox: Sandbox,
    task: GradableTask,
    inputs: GradingInputs,
    config: GradingConfig,
    *,
    staged: Staged,
    probe: PytestProbe | None,
    run_only: tuple[str, ...] | None = None,
) -> GradingInputs:
    """Run the task's tests (all, or `run_only` and the canaries) into `inputs`."""
    run_dir = staged.directory
    log_path = f"{run_dir}/test.log"
    command = _pytest_command(task, config)
    canary: Canary | None = None
    launch: LaunchPaths | None = None
    if command is not None and staged.launcher is not None:
        canary = await _place_canaries(sandbox, task, inputs, run_dir, staged.nonce)
        pristine = f"{run_dir}/pristine-config"
        if probe is not None and probe.ini_bytes is not None:
            await sandbox.write_file(pristine, probe.ini_bytes)
        spec = launch_spec(
            report=f"{run_dir}/report.json", canary_ids=canary.ids, run_only=run_only,
            probe=probe, nonce=staged.nonce, pristine_copy=pristine,
        )  # fmt: skip
        # The spec travels on the command line: one file fewer to write.
        launch = LaunchPaths(launcher=staged.launcher, spec=json.dumps(spec))
    script = test_run_script(
        task.test_command, task.test_env_setup, log_path, config,
        pytest_command=command, launch=launch,
    )  # fmt: skip
    ran = await sandbox.exec(
        script, timeout_s=config.test_timeout_s + config.kill_grace_s + config.host_margin_s
    )
    if ran.timed_out:
        error = InfraError("grading_timeout", "the test run outlived its host deadline")
        return replace(inputs, infra_error=error)
    if ran.exit_code not in (0, 1):
        await require_alive(sandbox, "the test run")
    inputs = replace(
        inputs,
        exit_code=ran.exit_code,
        test_duration_s=ran.duration_s,
        hardened=launch is not None,
        canary=canary,
        pristine_config=launch is not None and probe is not None,
    )
    try:
        log = await sandbox.read_file(log_path)
    except FileNotFoundError:
        # The sandbox lives, so the code under test removed its own log: the agent's zero.
        await require_alive(sandbox, "reading the test log")
        log = b""
    inputs = replace(inputs, log=log.decode("utf-8", errors="replace"))
    if canary is None:
        return inputs
    report = await read_optional(sandbox, f"{run_dir}/report.json")
    canary_output = await read_optional(sandbox, f"{run_dir}/{_canary_output_name(staged.nonce)}")
    return replace(
        inputs,
        run_report=None if report is None else parse_run_report(report),
        canary_output=None if canary_output is None else canary_output.decode("utf-8", "replace"),
    )


async def _place_canaries(
    sandbox: Sandbox, task: GradableTask, inputs: GradingInputs, run_dir: str, nonce: str
) -> Canary:
    """Inject this run's canaries into the task's (freshly restored) test files."""
    test_files = task_test_files(task)
    hosts = canary_host_files(nonce, inputs.fail_to_pass, inputs.pass_to_pass, test_files)
    sources: dict[str, str | None] = {}
    for path in hosts:
        raw = await read_optional(sandbox, path)
        try:
            sources[path] = None if raw is None else raw.decode("utf-8")
        except UnicodeDecodeError:
            sources[path] = None
    plan = await asyncio.to_thread(  # it parses whole test files: off the event loop
        plan_canaries, nonce, inputs.fail_to_pass, inputs.pass_to_pass, test_files, sources,
        output_path=f"{run_dir}/{_canary_output_name(nonce)}", fallback_dir=run_dir,
    )  # fmt: skip
    for path, text in plan.files.items():
        await sandbox.write_file(path, text.encode("utf-8"))
    return plan.canary


def _pytest_command(task: GradableTask, config: GradingConfig) -> PytestCommand | None:
    return parse_pytest_command(task.test_command) if config.harden_pytest else None


def _canary_output_name(nonce: str) -> str:
    return f"canary-{nonce}.out"


async def require_alive(sandbox: Sandbox, step: str) -> None:
    """Raise `SandboxDied` when a failed step's sandbox is gone (so it is not the patch's)."""
    if not await sandbox.is_alive():
        raise SandboxDied(f"the grading sandbox died during {step}")


async def read_optional(sandbox: Sandbox, path: str) -> bytes | None:
    try:
        return await sandbox.read_file(path)
    except FileNotFoundError:
        return None


async def write_path_list(sandbox: Sandbox, path: str, paths: tuple[str, ...]) -> None:
    """Write NUL-terminated paths (read back with `read -d ''` or `--pathspec-file-nul`)."""
    await sandbox.write_file(
        path, "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
    )


def task_test_files(task: GradableTask) -> list[str]:
    return list(dict.fromkeys([*task.test_files, *paths_in_patch(task.test_patch)]))
