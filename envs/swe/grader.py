"""`Grader`: take the agent's patch from its sandbox and run the task's tests on it elsewhere.

1. `extract_patch` (agent sandbox): `git add -A`, list the paths changed since `base_commit`,
   drop test paths (`is_test_path`) from the index, `git diff --cached --binary <base>`. The env
   computes the patch itself; nothing the agent writes is trusted as "the patch".
2. `grade` (a fresh sandbox from the task image, made by the injected factory): apply the patch
   (`git apply` → `git apply --reject` → `patch --fuzz`, resetting the tree between tries),
   restore the test files from `base_commit`, apply `test_patch`, run `task.test_command`
   (it must report every test, pytest `-rA`) under an in-sandbox `timeout -k`, between nonce
   markers, with the exit code after the end marker, into a log file that is read whole with
   `read_file` (exec output is capped; pytest's summary is at the end), then `grading.grade`
   decides. Infrastructure failures become `InfraError`s.

All commands use paths relative to the sandbox workdir (a local sandbox maps only the workdir).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from envs.swe.config import GradingConfig
from envs.swe.grading import (
    GradableTask,
    GradingInputs,
    GradingReport,
    InfraError,
    LogMarkers,
    LogParser,
    grade,
    is_test_path,
    paths_in_patch,
)
from harness.clock import Clock
from harness.errors import ImageNotFoundError, SandboxError
from harness.sandbox.base import Sandbox

__all__ = ["AgentPatch", "Grader", "GradingSandboxFactory"]

GradingSandboxFactory = Callable[[GradableTask], Awaitable[Sandbox]]
"""Makes a fresh sandbox from the task's image; the grader closes it when done."""

_APPLY_METHOD_PREFIX = "APPLY_METHOD="
_PATCH_BYTES_PREFIX = "PATCH_BYTES="
# git as the grader runs it: settings of the repository (which the agent controls) that would
# change what a diff looks like are overridden; external diff drivers and textconv are off.
_GIT = (
    "git -c core.quotepath=off -c color.ui=never -c diff.noprefix=false "
    "-c diff.mnemonicPrefix=false -c diff.relative=false"
)
_DIFF_OPTIONS = "--cached --no-renames --no-ext-diff --no-textconv"
_PATCH_TOO_LARGE = "patch_too_large"
_PATCH_APPLY_FAILED = "patch_apply_failed"


@dataclass(frozen=True, slots=True)
class AgentPatch:
    """The agent's changes as a binary-safe git diff, test paths removed."""

    diff: bytes
    changed_paths: tuple[str, ...] = ()
    discarded_paths: tuple[str, ...] = ()
    size_bytes: int = 0
    too_large: bool = False

    @property
    def text(self) -> str:
        return self.diff.decode("utf-8", errors="replace")


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
        """
        scratch = f"{self._config.scratch_dir}/{self._nonce()}"
        base = shlex.quote(task.base_commit)
        changed = await self._changed_paths(sandbox, task, scratch)
        if isinstance(changed, InfraError):
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
            f"{drop}{_GIT} diff {_DIFF_OPTIONS} --binary {base} > {scratch}/agent.patch && "
            f"echo && echo {_PATCH_BYTES_PREFIX}$(wc -c < {scratch}/agent.patch)",
            timeout_s=self._config.git_timeout_s,
        )
        # A marker, not "the last line": git's stderr arrives as its own stream and may share it.
        sizes = re.findall(rf"{_PATCH_BYTES_PREFIX}\s*(\d+)", diffed.output)
        if diffed.exit_code != 0 or not sizes:
            return InfraError("patch_extraction_failed", f"git diff failed: {diffed.output[-500:]}")
        size_bytes = int(sizes[-1])
        if size_bytes > self._config.max_patch_bytes:
            return AgentPatch(b"", changed, discarded, size_bytes, too_large=True)
        diff = await sandbox.read_file(f"{scratch}/agent.patch") if size_bytes else b""
        return AgentPatch(diff, changed, discarded, size_bytes)

    async def _changed_paths(
        self, sandbox: Sandbox, task: GradableTask, scratch: str
    ) -> tuple[str, ...] | InfraError:
        """Every path whose content differs from `base_commit` (index updated with `add -A`)."""
        listed = await sandbox.exec(
            f"mkdir -p {scratch} && git add -A && "
            f"{_GIT} diff {_DIFF_OPTIONS} --name-only -z {shlex.quote(task.base_commit)} "
            f"> {scratch}/changed",
            timeout_s=self._config.git_timeout_s,
        )
        if listed.exit_code != 0:
            return InfraError("patch_extraction_failed", f"git diff failed: {listed.output[-500:]}")
        raw_paths = await sandbox.read_file(f"{scratch}/changed")
        text = raw_paths.decode("utf-8", "surrogateescape")
        return tuple(path for path in text.split("\0") if path)

    def _test_paths(self, paths: tuple[str, ...], task: GradableTask) -> tuple[str, ...]:
        test_files = _task_test_files(task)
        patterns = self._config.test_path_patterns
        return tuple(path for path in paths if is_test_path(path, test_files, patterns))

    # -- grading side ---------------------------------------------------------------------------

    async def grade(self, task: GradableTask, patch: AgentPatch) -> GradingReport:
        """Grade `patch` in a fresh sandbox; never raises for infrastructure failures."""
        started_s = self._clock.now()
        markers = LogMarkers.with_nonce(self._nonce())
        inputs = GradingInputs(
            instance_id=task.instance_id,
            fail_to_pass=tuple(task.FAIL_TO_PASS),
            pass_to_pass=tuple(task.PASS_TO_PASS),
            markers=markers,
            discarded_paths=patch.discarded_paths,
        )
        if patch.too_large:
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
        if patch.diff.strip():
            await sandbox.write_file(f"{scratch}/agent.patch", patch.diff)
            applied = await sandbox.exec(
                _apply_script(f"{scratch}/agent.patch", config.patch_fuzz_lines),
                timeout_s=config.git_timeout_s,
            )
            method = _apply_method(applied.output)
            if applied.exit_code != 0 or method is None:
                return replace(inputs, patch_error=_PATCH_APPLY_FAILED)
            inputs = replace(inputs, apply_method=method)
            reverted = await self._revert_test_changes(sandbox, task, scratch)
            if isinstance(reverted, InfraError):
                return replace(inputs, infra_error=reverted)
            discarded = tuple(dict.fromkeys([*inputs.discarded_paths, *reverted]))
            inputs = replace(inputs, discarded_paths=discarded)
        else:
            inputs = replace(inputs, apply_method="empty")
        await sandbox.write_file(f"{scratch}/test.patch", task.test_patch.encode("utf-8"))
        prepared = await sandbox.exec(
            _prepare_tests_script(
                task.base_commit, _task_test_files(task), f"{scratch}/test.patch"
            ),
            timeout_s=config.git_timeout_s,
        )
        if prepared.exit_code != 0:
            message = f"test_patch did not apply: {prepared.output[-500:]}"
            return replace(inputs, infra_error=InfraError("test_patch_failed", message))
        log_path = f"{scratch}/test.log"
        ran = await sandbox.exec(
            _test_script(task.test_command, log_path, inputs.markers, config),
            timeout_s=config.test_timeout_s + config.kill_grace_s + config.host_margin_s,
        )
        if ran.timed_out:
            error = InfraError("grading_timeout", "the test run outlived its host deadline")
            return replace(inputs, infra_error=error)
        try:
            log = await sandbox.read_file(log_path)
        except FileNotFoundError:
            error = InfraError("no_test_output", f"no test log was written: {ran.output[-500:]}")
            return replace(inputs, infra_error=error)
        return replace(inputs, log=log.decode("utf-8", errors="replace"))

    async def _revert_test_changes(
        self, sandbox: Sandbox, task: GradableTask, scratch: str
    ) -> tuple[str, ...] | InfraError:
        """Undo any test-path change the applied patch made (a second line of defence: the
        patch was filtered when extracted, but a grader must not rely on its input)."""
        changed = await self._changed_paths(sandbox, task, scratch)
        if isinstance(changed, InfraError):
            return InfraError("grading_git_failed", changed.message)
        reverted = self._test_paths(changed, task)
        if reverted:
            await _write_path_list(sandbox, f"{scratch}/revert", reverted)
            done = await sandbox.exec(
                f"while IFS= read -r -d '' f; do {_restore_one(task.base_commit)} || exit 3; "
                f"done < {scratch}/revert",
                timeout_s=self._config.git_timeout_s,
            )
            if done.exit_code != 0:
                return InfraError("grading_git_failed", f"could not revert: {done.output[-500:]}")
        return reverted


async def _write_path_list(sandbox: Sandbox, path: str, paths: tuple[str, ...]) -> None:
    """Write NUL-terminated paths (read back with `read -d ''` or `--pathspec-file-nul`)."""
    await sandbox.write_file(
        path, "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
    )


def _restore_one(base_commit: str) -> str:
    """Shell code that puts "$f" back as it is in `base_commit` (or removes it if absent)."""
    base = shlex.quote(base_commit)
    return (
        f'if git cat-file -e {base}:"$f" 2>/dev/null; then git checkout -q {base} -- "$f"; '
        'else rm -rf -- "$f"; fi'
    )


def _task_test_files(task: GradableTask) -> list[str]:
    return list(dict.fromkeys([*task.test_files, *paths_in_patch(task.test_patch)]))


def _apply_script(patch_path: str, fuzz_lines: int) -> str:
    """Try each way of applying; reset the tree between tries so none sees a half-applied one."""
    path = shlex.quote(patch_path)
    attempts = [
        ("git_apply", f"git apply --verbose {path}"),
        ("git_apply_reject", f"git apply --verbose --reject {path}"),
        ("patch_fuzz", f"patch --batch --fuzz={fuzz_lines} -p1 -i {path}"),
    ]
    reset = "git reset -q --hard && git clean -fdq"
    # `2>&1`: git reports on stderr, which reaches us as a separate stream; merged here, the
    # marker cannot land in the middle of git's "Checking patch ..." line.
    lines = [
        f"if {command} 2>&1; then echo; echo {_APPLY_METHOD_PREFIX}{name}; exit 0; fi; {reset}"
        for name, command in attempts
    ]
    return "\n".join([*lines, "exit 1"])


def _apply_method(output: str) -> str | None:
    """The method the apply script reported (the last marker, wherever it lands in a line)."""
    found = re.findall(rf"{re.escape(_APPLY_METHOD_PREFIX)}(\w+)", output)
    return found[-1] if found else None


def _prepare_tests_script(base_commit: str, test_files: list[str], test_patch_path: str) -> str:
    """Restore every test file to `base_commit` (remove the ones it lacks), then `test_patch`."""
    files = " ".join(shlex.quote(path) for path in test_files)
    loop = (
        f"for f in {files}; do {_restore_one(base_commit)} || exit 3; done" if test_files else ":"
    )
    return f"{loop}\ngit apply --verbose {shlex.quote(test_patch_path)}"


def _test_script(test_cmd: str, log_path: str, markers: LogMarkers, config: GradingConfig) -> str:
    log = shlex.quote(log_path)
    half = config.max_log_bytes // 2
    run = (
        f"{{ printf '%s\\n' {shlex.quote(markers.start)}; "
        f"timeout -k {config.kill_grace_s:g} {config.test_timeout_s:g} "
        f"bash -c {shlex.quote(test_cmd)}; "
        "rc=$?; "
        f"printf '%s\\n%s %s\\n' {shlex.quote(markers.end)} {shlex.quote(markers.exit_code)} "
        '"$rc"; } '
        f"> {log} 2>&1 < /dev/null"
    )
    cap = (
        f'if [ "$(wc -c < {log})" -gt {config.max_log_bytes} ]; then '
        f"{{ head -c {half} {log}; printf '\\n[... log elided ...]\\n'; tail -c {half} {log}; }} "
        f"> {log}.cut && mv {log}.cut {log}; fi"
    )
    return f"{run}\n{cap}"
