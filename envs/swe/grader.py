"""`Grader`: take the agent's patch from its sandbox and run the task's tests on it elsewhere.

1. `extract_patch` (agent sandbox): refuse any file over the patch size limit before git reads
   it, `git add -A` (build artefacts excluded: `.gitignore` plus `extract_exclude_patterns`),
   list the paths changed since `base_commit`, drop test paths (`is_test_path`) from the index,
   `git diff --cached --binary <base>`. The env computes the patch itself; nothing the agent
   writes is trusted as "the patch". A git failure in a live sandbox is the agent's doing
   (reward 0); in a dead one it is an infra error.
2. `grade` (a fresh sandbox from the task image, made by the injected factory): apply the patch
   (`git apply` → `git apply --reject` → `patch --fuzz`, resetting the tree between tries),
   restore protected paths (tests, conftest, pytest config files, caches, packaging metadata)
   and pytest sections of `pyproject.toml` / `setup.cfg` the patch changed, restore the test
   files from `base_commit`, apply `test_patch`, then run `task.test_command` under an
   in-sandbox `timeout -k` into a log file. A pytest command runs through the launcher
   (`grading_assets/launch_pytest.py`): the image's pytest pinned, a report of every outcome,
   canary tests. `grading.grade` decides. A failed step is an infra error only when the
   sandbox died; everything else the patch could cause is the agent's.

All commands use paths relative to the sandbox workdir (a local sandbox maps only the workdir).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from importlib import resources

from envs.swe.canary import Canary
from envs.swe.config import GradingConfig
from envs.swe.config_guard import SECTIONED_CONFIG_NAMES, pytest_settings_changed
from envs.swe.grading import (
    GradableTask,
    GradingInputs,
    GradingReport,
    InfraError,
    LogParser,
    grade,
    is_test_path,
    paths_in_patch,
)
from envs.swe.grading_scripts import (
    GIT,
    LaunchPaths,
    apply_method,
    apply_script,
    prepare_tests_script,
    restore_one,
    test_run_script,
)
from envs.swe.run_report import parse_run_report
from envs.swe.test_command import parse_pytest_command
from foundation.clock import Clock
from harness.errors import ImageNotFoundError, SandboxError
from harness.sandbox.base import ExecResult, Sandbox

__all__ = ["AgentPatch", "Grader", "GradingSandboxFactory"]

GradingSandboxFactory = Callable[[GradableTask], Awaitable[Sandbox]]
"""Makes a fresh sandbox from the task's image; the grader closes it when done."""

_PATCH_BYTES_PREFIX = "PATCH_BYTES="
_OVERSIZED_PREFIX = "OVERSIZED="
_DIFF_OPTIONS = "--cached --no-renames --no-ext-diff --no-textconv"
_PATCH_TOO_LARGE = "patch_too_large"
_PATCH_APPLY_FAILED = "patch_apply_failed"
_LAUNCHER = resources.files("envs.swe.grading_assets").joinpath("launch_pytest.py").read_bytes()


@dataclass(frozen=True, slots=True)
class AgentPatch:
    """The agent's changes as a binary-safe git diff, test paths removed.

    `error` says why no patch could be taken although the sandbox lives (the agent broke the
    repository, or made git time out): the patch is then graded 0, as the agent's fault.
    """

    diff: bytes
    changed_paths: tuple[str, ...] = ()
    discarded_paths: tuple[str, ...] = ()
    size_bytes: int = 0
    too_large: bool = False
    error: str | None = None

    @property
    def text(self) -> str:
        return self.diff.decode("utf-8", errors="replace")


class _SandboxDied(Exception):
    """A step failed because its sandbox is gone: an infrastructure failure."""


class Grader:
    """Extracts and grades patches for one config; safe to share between episodes."""

    def __init__(
        self,
        config: GradingConfig,
        sandbox_factory: GradingSandboxFactory,
        *,
        clock: Clock,
        parse_log: LogParser,
        nonce: Callable[[], str] = lambda: secrets.token_hex(8),
    ) -> None:
        self._config = config
        self._factory = sandbox_factory
        self._clock = clock
        self._parse_log = parse_log
        self._nonce = nonce

    # -- agent side -----------------------------------------------------------------------------

    async def extract_patch(self, sandbox: Sandbox, task: GradableTask) -> AgentPatch | InfraError:
        """The agent's non-test changes since `task.base_commit`. Raises SandboxDeadError.

        Works in a fresh nonce-named scratch directory (the agent cannot prepare files there)
        and with git options that ignore the repository's diff drivers, prefixes and colours.
        An `InfraError` only when the sandbox died under a step.
        """
        scratch = f"{self._config.scratch_dir}/{self._nonce()}"
        oversized = await self._oversized_file(sandbox, scratch)
        if isinstance(oversized, InfraError):
            return oversized
        if oversized is not None:
            return AgentPatch(b"", (oversized,), (), 0, too_large=True)
        base = shlex.quote(task.base_commit)
        changed = await self._changed_paths(sandbox, task, scratch)
        if isinstance(changed, InfraError | AgentPatch):
            return changed
        discarded = self._test_paths(changed, task)
        drop = ""
        if discarded:
            await _write_path_list(sandbox, f"{scratch}/excluded", discarded)
            drop = (
                f"GIT_LITERAL_PATHSPECS=1 git reset -q --pathspec-from-file={scratch}/excluded "
                f"--pathspec-file-nul {base} && "
            )
        diffed = await sandbox.exec(
            f"{drop}{GIT} diff {_DIFF_OPTIONS} --binary {base} > {scratch}/agent.patch && "
            f"echo && echo {_PATCH_BYTES_PREFIX}$(wc -c < {scratch}/agent.patch)",
            timeout_s=self._config.git_timeout_s,
        )
        # A marker, not "the last line": git's stderr arrives as its own stream and may share it.
        sizes = re.findall(rf"{_PATCH_BYTES_PREFIX}\s*(\d+)", diffed.output)
        if diffed.exit_code != 0 or not sizes:
            return await self._agent_git_failure(sandbox, diffed, "git diff")
        size_bytes = int(sizes[-1])
        if size_bytes > self._config.max_patch_bytes:
            return AgentPatch(b"", changed, discarded, size_bytes, too_large=True)
        diff = await sandbox.read_file(f"{scratch}/agent.patch") if size_bytes else b""
        return AgentPatch(diff, changed, discarded, size_bytes)

    async def _oversized_file(self, sandbox: Sandbox, scratch: str) -> str | InfraError | None:
        """A new file larger than the patch limit, found before `git add` hashes it all."""
        limit = self._config.max_patch_bytes
        # New files only (untracked, not ignored): listing them hashes nothing, and a large
        # file the repository already tracks is not the agent's.
        found = await sandbox.exec(
            f"mkdir -p {scratch} && f=$(git ls-files -z --others --exclude-standard | "
            f"xargs -0 -r stat -c '%s %n' -- 2>/dev/null | "
            f"awk -v max={limit} '$1 > max {{ sub(/^[0-9]+ /, \"\"); print; exit }}'); "
            f"echo; echo {_OVERSIZED_PREFIX}$f",
            timeout_s=self._config.git_timeout_s,
        )
        if found.exit_code != 0:
            failure = await self._agent_git_failure(sandbox, found, "the size check")
            return failure if isinstance(failure, InfraError) else None
        paths = re.findall(rf"{_OVERSIZED_PREFIX}(.*)", found.output)
        return paths[-1].strip().removeprefix("./") or None if paths else None

    async def _changed_paths(
        self, sandbox: Sandbox, task: GradableTask, scratch: str, *, exclude_artefacts: bool = True
    ) -> tuple[str, ...] | InfraError | AgentPatch:
        """Every path whose content differs from `base_commit` (index updated with `add -A`;
        build artefacts excluded when extracting, never when grading)."""
        patterns = self._config.extract_exclude_patterns if exclude_artefacts else ()
        excludes = " ".join(shlex.quote(f":(exclude,glob){pattern}") for pattern in patterns)
        listed = await sandbox.exec(
            f"mkdir -p {scratch} && git add -A -- . {excludes} && "
            f"{GIT} diff {_DIFF_OPTIONS} --name-only -z {shlex.quote(task.base_commit)} "
            f"> {scratch}/changed",
            timeout_s=self._config.git_timeout_s,
        )
        if listed.exit_code != 0:
            return await self._agent_git_failure(sandbox, listed, "git add / git diff")
        raw_paths = await sandbox.read_file(f"{scratch}/changed")
        text = raw_paths.decode("utf-8", "surrogateescape")
        return tuple(path for path in text.split("\0") if path)

    async def _agent_git_failure(
        self, sandbox: Sandbox, result: ExecResult, step: str
    ) -> AgentPatch | InfraError:
        """A failed step in the agent's sandbox: infra if the sandbox died, else the agent's."""
        if not await sandbox.is_alive():
            message = f"the agent sandbox died during {step}: {result.output[-300:]}"
            return InfraError("agent_sandbox_dead", message)
        how = "timed out" if result.timed_out else f"failed (exit {result.exit_code})"
        return AgentPatch(b"", error=f"patch_extraction_failed: {step} {how} in the agent's repo")

    def _test_paths(self, paths: tuple[str, ...], task: GradableTask) -> tuple[str, ...]:
        test_files = _task_test_files(task)
        patterns = self._config.test_path_patterns
        return tuple(path for path in paths if is_test_path(path, test_files, patterns))

    # -- grading side ---------------------------------------------------------------------------

    async def grade(self, task: GradableTask, patch: AgentPatch) -> GradingReport:
        """Grade `patch` in a fresh sandbox; never raises for infrastructure failures."""
        started_s = self._clock.now()
        inputs = GradingInputs(
            instance_id=task.instance_id,
            fail_to_pass=tuple(task.FAIL_TO_PASS),
            pass_to_pass=tuple(task.PASS_TO_PASS),
            discarded_paths=patch.discarded_paths,
        )
        if patch.error is not None:
            inputs = replace(inputs, patch_error=patch.error)
        elif patch.too_large:
            inputs = replace(inputs, patch_error=_PATCH_TOO_LARGE)
        else:
            try:
                async with asyncio.timeout(self._config.grading_deadline_s):
                    inputs = await self._run_in_fresh_sandbox(task, patch, inputs)
            except TimeoutError:  # before OSError, of which it is a subclass
                limit = f"{self._config.grading_deadline_s:g} s"
                error = InfraError("grading_timeout", f"grading took longer than {limit}")
                inputs = replace(inputs, infra_error=error)
            except ImageNotFoundError as exc:
                inputs = replace(inputs, infra_error=InfraError("image_missing", str(exc)))
            except _SandboxDied as exc:
                inputs = replace(inputs, infra_error=InfraError("grading_sandbox_died", str(exc)))
            except (SandboxError, OSError) as exc:
                message = str(exc) or type(exc).__name__
                inputs = replace(inputs, infra_error=InfraError("sandbox_error", message))
        inputs = replace(inputs, duration_s=self._clock.now() - started_s)
        return grade(inputs, self._config, self._parse_log)

    async def _run_in_fresh_sandbox(
        self, task: GradableTask, patch: AgentPatch, inputs: GradingInputs
    ) -> GradingInputs:
        sandbox = await self._factory(task)
        try:
            return await self._run_steps(sandbox, task, patch, inputs)
        finally:
            await asyncio.shield(sandbox.aclose())

    async def _run_steps(
        self, sandbox: Sandbox, task: GradableTask, patch: AgentPatch, inputs: GradingInputs
    ) -> GradingInputs:
        config = self._config
        scratch = config.scratch_dir
        await sandbox.exec(f"mkdir -p {scratch}", timeout_s=config.git_timeout_s)
        inputs = replace(inputs, workdir=sandbox.workdir)
        if patch.diff.strip():
            await sandbox.write_file(f"{scratch}/agent.patch", patch.diff)
            applied = await sandbox.exec(
                apply_script(f"{scratch}/agent.patch", config.patch_fuzz_lines),
                timeout_s=config.git_timeout_s,
            )
            method = apply_method(applied.output)
            if applied.exit_code != 0 or method is None:
                await _require_alive(sandbox, "applying the patch")
                return replace(inputs, patch_error=_PATCH_APPLY_FAILED)
            inputs = replace(inputs, apply_method=method)
            reverted = await self._revert_protected_changes(sandbox, task, scratch, patch)
            if isinstance(reverted, InfraError):
                return replace(inputs, infra_error=reverted)
            discarded = tuple(dict.fromkeys([*inputs.discarded_paths, *reverted]))
            inputs = replace(inputs, discarded_paths=discarded)
        else:
            inputs = replace(inputs, apply_method="empty")
        await sandbox.write_file(f"{scratch}/test.patch", task.test_patch.encode("utf-8"))
        prepared = await sandbox.exec(
            prepare_tests_script(task.base_commit, _task_test_files(task), f"{scratch}/test.patch"),
            timeout_s=config.git_timeout_s,
        )
        if prepared.exit_code != 0:
            await _require_alive(sandbox, "applying test_patch")
            message = f"test_patch did not apply: {prepared.output[-500:]}"
            return replace(inputs, infra_error=InfraError("test_patch_failed", message))
        return await self._run_tests(sandbox, task, inputs)

    async def _run_tests(
        self, sandbox: Sandbox, task: GradableTask, inputs: GradingInputs
    ) -> GradingInputs:
        config = self._config
        run_dir = f"{config.scratch_dir}/{self._nonce()}"
        log_path = f"{run_dir}/test.log"
        pytest_command = parse_pytest_command(task.test_command) if config.harden_pytest else None
        canary: Canary | None = None
        launch: LaunchPaths | None = None
        if pytest_command is None:  # the log's directory (write_file makes its own)
            await sandbox.exec(f"mkdir -p {run_dir}", timeout_s=config.git_timeout_s)
        else:
            canary = Canary(self._nonce())
            launch = LaunchPaths(
                launcher=f"{run_dir}/launch_pytest.py",
                canary=f"{run_dir}/{canary.module_name}",
                report=f"{run_dir}/report.json",
            )
            await sandbox.write_file(launch.launcher, _LAUNCHER)
            await sandbox.write_file(launch.canary, canary.source().encode())
        script = test_run_script(
            task.test_command,
            task.test_env_setup,
            log_path,
            config,
            pytest_command=pytest_command,
            launch=launch,
        )
        ran = await sandbox.exec(
            script, timeout_s=config.test_timeout_s + config.kill_grace_s + config.host_margin_s
        )
        if ran.timed_out:
            error = InfraError("grading_timeout", "the test run outlived its host deadline")
            return replace(inputs, infra_error=error)
        if ran.exit_code not in (0, 1):
            await _require_alive(sandbox, "the test run")
        inputs = replace(
            inputs,
            exit_code=ran.exit_code,
            test_duration_s=ran.duration_s,
            hardened=launch is not None,
            canary=canary,
        )
        try:
            log = await sandbox.read_file(log_path)
        except FileNotFoundError:
            # The sandbox lives, so the code under test removed its own log: the agent's zero.
            await _require_alive(sandbox, "reading the test log")
            log = b""
        inputs = replace(inputs, log=log.decode("utf-8", errors="replace"))
        if launch is None or canary is None:
            return inputs
        report = await _read_optional(sandbox, launch.report)
        canary_output = await _read_optional(sandbox, f"{run_dir}/{canary.output_name}")
        return replace(
            inputs,
            run_report=None if report is None else parse_run_report(report),
            canary_output=_text_or_none(canary_output),
        )

    async def _revert_protected_changes(
        self, sandbox: Sandbox, task: GradableTask, scratch: str, patch: AgentPatch
    ) -> tuple[str, ...] | InfraError:
        """Undo every change to a protected path, and pytest-section changes of sectioned config
        files (a second line of defence: the patch was filtered when extracted, but a grader
        must not rely on its input). The paths are those git sees changed plus every path the
        patch names (a `.gitignore` in the patch must not hide a file from this check)."""
        listed = await self._changed_paths(sandbox, task, scratch, exclude_artefacts=False)
        if isinstance(listed, AgentPatch | InfraError):
            await _require_alive(sandbox, "listing the patch's changes")
            message = listed.error if isinstance(listed, AgentPatch) else listed.message
            return InfraError("grading_git_failed", message or "git failed")
        named = paths_in_patch(patch.diff.decode("utf-8", "surrogateescape"))
        changed = tuple(dict.fromkeys([*listed, *named]))
        reverted = list(self._test_paths(changed, task))
        for path in changed:
            sectioned = path.rsplit("/", 1)[-1] in SECTIONED_CONFIG_NAMES
            if (
                sectioned
                and path not in reverted
                and await self._pytest_settings_changed(sandbox, task, path)
            ):
                reverted.append(path)
        if reverted:
            await _write_path_list(sandbox, f"{scratch}/revert", tuple(reverted))
            done = await sandbox.exec(
                f"while IFS= read -r -d '' f; do {restore_one(task.base_commit)} || exit 3; "
                f"done < {scratch}/revert",
                timeout_s=self._config.git_timeout_s,
            )
            if done.exit_code != 0:
                await _require_alive(sandbox, "restoring protected files")
                return InfraError("grading_git_failed", f"could not revert: {done.output[-500:]}")
        return tuple(reverted)

    async def _pytest_settings_changed(
        self, sandbox: Sandbox, task: GradableTask, path: str
    ) -> bool:
        scratch = f"{self._config.scratch_dir}/config-base"
        shown = await sandbox.exec(
            f"mkdir -p {scratch} && git show {shlex.quote(f'{task.base_commit}:{path}')} "
            f"> {scratch}/file 2>/dev/null",
            timeout_s=self._config.git_timeout_s,
        )
        base = await sandbox.read_file(f"{scratch}/file") if shown.exit_code == 0 else None
        patched = await _read_optional(sandbox, path)
        return pytest_settings_changed(path, base, patched)


async def _require_alive(sandbox: Sandbox, step: str) -> None:
    """Raise `_SandboxDied` when a failed step's sandbox is gone (so it is not the patch's)."""
    if not await sandbox.is_alive():
        raise _SandboxDied(f"the grading sandbox died during {step}")


def _text_or_none(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


async def _read_optional(sandbox: Sandbox, path: str) -> bytes | None:
    try:
        return await sandbox.read_file(path)
    except FileNotFoundError:
        return None


async def _write_path_list(sandbox: Sandbox, path: str, paths: tuple[str, ...]) -> None:
    """Write NUL-terminated paths (read back with `read -d ''` or `--pathspec-file-nul`)."""
    await sandbox.write_file(
        path, "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
    )


def _task_test_files(task: GradableTask) -> list[str]:
    return list(dict.fromkeys([*task.test_files, *paths_in_patch(task.test_patch)]))
