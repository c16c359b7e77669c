"""`Grader`: take the agent's patch from its sandbox and run the task's tests on it elsewhere.

1. `extract_patch` (agent sandbox): refuse any file over the patch size limit before git reads
   it, `git add -A` (build artefacts excluded: `.gitignore` plus `extract_exclude_patterns`),
   list the paths changed since `base_commit`, drop test paths (`is_test_path`) from the index,
   `git diff --cached --binary <base>`. The env computes the patch itself; nothing the agent
   writes is trusted as "the patch". A git failure in a live sandbox is the agent's doing
   (reward 0); in a dead one it is an infra error.
2. `grade`, first verdict (a fresh sandbox from the task image, made by the injected factory):
   on the pristine tree, ask pytest which configuration it reads (`grading_run.probe_pytest`);
   apply the patch (`git apply` → `git apply --reject` → `patch --fuzz`, resetting the tree
   between tries); restore protected paths (tests, conftest, pytest config files, caches,
   packaging metadata) and pytest sections of `pyproject.toml` / `setup.cfg` the patch changed;
   refuse a changed file that configures Python or pytest and is a symlink or has odd line
   breaks; restore the test files from `base_commit`, apply `test_patch`, then run
   `task.test_command` (`grading_run.run_tests`: a pytest command through the launcher, with
   the pristine configuration and canaries hidden in the task's test files). `grading.grade`
   decides.
3. Second verdict, when the first resolves and `second_verdict` is on: another fresh sandbox,
   only the patch's non-test source changes (`source_patch`), pristine tests, the FAIL_TO_PASS
   tests re-run; `grading.combine_verdicts` requires both to agree.

A failed step is an infra error only when the sandbox died; everything else the patch could
cause is the agent's. All commands use paths relative to the sandbox workdir (a local sandbox
maps only the workdir).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shlex
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

from envs.swe.canary import Canary
from envs.swe.config import GradingConfig
from envs.swe.config_guard import (
    SECTIONED_CONFIG_NAMES,
    config_file_problem,
    pytest_settings_changed,
)
from envs.swe.grading import (
    GradableTask,
    GradingInputs,
    GradingReport,
    InfraError,
    LogParser,
    combine_verdicts,
    grade,
    is_test_path,
    paths_in_patch,
)
from envs.swe.grading_run import (
    SandboxDied,
    Staged,
    probe_pytest,
    read_optional,
    require_alive,
    run_tests,
    stage,
    task_test_files,
    write_path_list,
)
from envs.swe.grading_scripts import (
    GIT,
    apply_method,
    apply_script,
    prepare_tests_script,
    restore_one,
    symlinks_script,
)
from envs.swe.pytest_probe import PytestProbe
from envs.swe.source_patch import shadows_stdlib, source_changes
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
            await write_path_list(sandbox, f"{scratch}/excluded", discarded)
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
        """Grade `patch` in a fresh sandbox (two, when the first resolves and the second verdict
        is on); never raises for infrastructure failures."""
        started_s = self._clock.now()
        inputs = GradingInputs(
            instance_id=task.instance_id,
            fail_to_pass=tuple(task.FAIL_TO_PASS),
            pass_to_pass=tuple(task.PASS_TO_PASS),
            discarded_paths=patch.discarded_paths,
        )
        if patch.error is not None:
            report = grade(replace(inputs, patch_error=patch.error), self._config, self._parse_log)
        elif patch.too_large:
            too_large = replace(inputs, patch_error=_PATCH_TOO_LARGE)
            report = grade(too_large, self._config, self._parse_log)
        else:
            report = await self._grade_applied(task, patch, inputs)
        return replace(report, duration_s=self._clock.now() - started_s)

    async def _grade_applied(
        self, task: GradableTask, patch: AgentPatch, inputs: GradingInputs
    ) -> GradingReport:
        """Both verdicts under the grading deadline; a broken sandbox or image is an infra error."""
        error: InfraError | None = None
        try:
            async with asyncio.timeout(self._config.grading_deadline_s):
                return await self._two_verdicts(task, patch, inputs)
        except TimeoutError:  # before OSError, of which it is a subclass
            limit = f"{self._config.grading_deadline_s:g} s"
            error = InfraError("grading_timeout", f"grading took longer than {limit}")
        except ImageNotFoundError as exc:
            error = InfraError("image_missing", str(exc))
        except SandboxDied as exc:
            error = InfraError("grading_sandbox_died", str(exc))
        except (SandboxError, OSError) as exc:
            error = InfraError("sandbox_error", str(exc) or type(exc).__name__)
        return grade(replace(inputs, infra_error=error), self._config, self._parse_log)

    async def _two_verdicts(
        self, task: GradableTask, patch: AgentPatch, inputs: GradingInputs
    ) -> GradingReport:
        sandbox = await self._factory(task)
        try:
            first_inputs, probe = await self._first_run(sandbox, task, patch, inputs)
        finally:
            await asyncio.shield(sandbox.aclose())
        first = grade(first_inputs, self._config, self._parse_log)
        if not (first.resolved and self._config.second_verdict):
            return first
        started_s = self._clock.now()
        sandbox = await self._factory(task)
        try:
            second_inputs = await self._second_run(sandbox, task, patch, inputs, probe)
        finally:
            await asyncio.shield(sandbox.aclose())
        second = grade(second_inputs, self._config, self._parse_log)
        second = replace(second, duration_s=self._clock.now() - started_s)
        reported = collected = None
        first_run, second_run = first_inputs.run_report, second_inputs.run_report
        if first_run is not None and second_run is not None and second_run.collected is not None:
            reported = _task_tests(first_run.tests, first_inputs.canary)
            collected = _task_tests(second_run.collected, second_inputs.canary)
        return combine_verdicts(first, second, reported=reported, collected=collected)

    async def _first_run(
        self, sandbox: Sandbox, task: GradableTask, patch: AgentPatch, inputs: GradingInputs
    ) -> tuple[GradingInputs, PytestProbe | None]:
        """Probe the pristine configuration, apply the whole patch, undo protected changes,
        refuse odd configuration files, restore the tests, run them."""
        config = self._config
        scratch = config.scratch_dir
        inputs = replace(inputs, workdir=sandbox.workdir)
        staged = await stage(sandbox, task, config, self._nonce())
        probe = await probe_pytest(sandbox, task, config, staged)
        if isinstance(probe, InfraError):
            return replace(inputs, infra_error=probe), None
        if patch.diff.strip():
            applied = await self._apply(sandbox, patch.diff, f"{scratch}/agent.patch")
            if applied is None:
                return replace(inputs, patch_error=_PATCH_APPLY_FAILED), probe
            inputs = replace(inputs, apply_method=applied)
            reverted = await self._revert_protected_changes(sandbox, task, scratch, patch)
            if isinstance(reverted, InfraError):
                return replace(inputs, infra_error=reverted), probe
            discarded = tuple(dict.fromkeys([*inputs.discarded_paths, *reverted[0]]))
            inputs = replace(inputs, discarded_paths=discarded)
            refused = await self._refused_config_file(sandbox, task, scratch, reverted[1])
            if refused is not None:
                return replace(inputs, config_refused=refused), probe
        else:
            inputs = replace(inputs, apply_method="empty")
        prepared = await self._prepare_tests(sandbox, task, staged)
        if prepared is not None:
            return replace(inputs, infra_error=prepared), probe
        tested = await run_tests(sandbox, task, inputs, config, staged=staged, probe=probe)
        return tested, probe

    async def _second_run(
        self,
        sandbox: Sandbox,
        task: GradableTask,
        patch: AgentPatch,
        inputs: GradingInputs,
        probe: PytestProbe | None,
    ) -> GradingInputs:
        """The FAIL_TO_PASS tests again, in a fresh sandbox, with only the patch's non-test
        source changes applied to the pristine tree (`source_patch`)."""
        config = self._config
        scratch = config.scratch_dir
        inputs = replace(inputs, pass_to_pass=(), discarded_paths=(), workdir=sandbox.workdir)
        staged = await stage(sandbox, task, config, self._nonce())
        test_files = _task_test_files(task)

        def drop(path: str) -> bool:
            return (
                is_test_path(path, test_files, config.test_path_patterns)
                or is_test_path(path, (), config.config_file_patterns)
                or shadows_stdlib(path)
            )

        source = source_changes(patch.diff, drop)
        inputs = replace(inputs, discarded_paths=source.dropped_paths, apply_method="empty")
        if source.diff.strip():
            applied = await self._apply(sandbox, source.diff, f"{scratch}/source.patch")
            if applied is None:
                return replace(inputs, patch_error="the patch's source changes did not apply")
            inputs = replace(inputs, apply_method=applied)
        prepared = await self._prepare_tests(sandbox, task, staged)
        if prepared is not None:
            return replace(inputs, infra_error=prepared)
        return await run_tests(
            sandbox, task, inputs, config, staged=staged, probe=probe,
            run_only=inputs.fail_to_pass,
        )  # fmt: skip

    async def _apply(self, sandbox: Sandbox, diff: bytes, path: str) -> str | None:
        """Apply `diff` (see `apply_script`); the method used, or None when nothing applied."""
        await sandbox.write_file(path, diff)
        applied = await sandbox.exec(
            apply_script(path, self._config.patch_fuzz_lines), timeout_s=self._config.git_timeout_s
        )
        method = apply_method(applied.output)
        if applied.exit_code != 0 or method is None:
            await require_alive(sandbox, "applying the patch")
            return None
        return method

    async def _prepare_tests(
        self, sandbox: Sandbox, task: GradableTask, staged: Staged
    ) -> InfraError | None:
        """Restore the test files from `base_commit` and apply `test_patch`."""
        prepared = await sandbox.exec(
            prepare_tests_script(task.base_commit, _task_test_files(task), staged.test_patch),
            timeout_s=self._config.git_timeout_s,
        )
        if prepared.exit_code != 0:
            await require_alive(sandbox, "applying test_patch")
            return InfraError(
                "test_patch_failed", f"test_patch did not apply: {prepared.output[-500:]}"
            )
        return None

    async def _revert_protected_changes(
        self, sandbox: Sandbox, task: GradableTask, scratch: str, patch: AgentPatch
    ) -> tuple[tuple[str, ...], tuple[str, ...]] | InfraError:
        """Undo every change to a protected path, and pytest-section changes of sectioned config
        files (a second line of defence: the patch was filtered when extracted, but a grader
        must not rely on its input). The paths are those git sees changed plus every path the
        patch names (a `.gitignore` in the patch must not hide a file from this check).
        Returns (the paths reverted, every path changed)."""
        listed = await self._changed_paths(sandbox, task, scratch, exclude_artefacts=False)
        if isinstance(listed, AgentPatch | InfraError):
            await require_alive(sandbox, "listing the patch's changes")
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
                and not await self._is_symlink(sandbox, scratch, path)
                and await self._pytest_settings_changed(sandbox, task, path)
            ):
                reverted.append(path)
        if reverted:
            await write_path_list(sandbox, f"{scratch}/revert", tuple(reverted))
            done = await sandbox.exec(
                f"while IFS= read -r -d '' f; do {restore_one(task.base_commit)} || exit 3; "
                f"done < {scratch}/revert",
                timeout_s=self._config.git_timeout_s,
            )
            if done.exit_code != 0:
                await require_alive(sandbox, "restoring protected files")
                return InfraError("grading_git_failed", f"could not revert: {done.output[-500:]}")
        return tuple(reverted), changed

    async def _refused_config_file(
        self, sandbox: Sandbox, task: GradableTask, scratch: str, changed: tuple[str, ...]
    ) -> str | None:
        """Why a changed file that configures Python or pytest is refused (`config_guard`)."""
        patterns = self._config.config_file_patterns
        candidates = tuple(path for path in changed if is_test_path(path, (), patterns))
        if not candidates:
            return None
        await write_path_list(sandbox, f"{scratch}/config-files", candidates)
        listed = await sandbox.exec(
            symlinks_script(f"{scratch}/config-files"), timeout_s=self._config.git_timeout_s
        )
        links = set(re.findall(r"^LINK (.*)$", listed.output, re.MULTILINE))
        for path in candidates:
            patched = None if path in links else await read_optional(sandbox, path)
            problem = config_file_problem(
                path, is_symlink=path in links, patched=patched, base=None
            )
            if problem is not None and path not in links:  # odd breaks: the base may have them
                base = await self._base_version(sandbox, task, path)
                problem = config_file_problem(path, is_symlink=False, patched=patched, base=base)
            if problem is not None:
                return problem
        return None

    async def _is_symlink(self, sandbox: Sandbox, scratch: str, path: str) -> bool:
        await write_path_list(sandbox, f"{scratch}/link-check", (path,))
        listed = await sandbox.exec(
            symlinks_script(f"{scratch}/link-check"), timeout_s=self._config.git_timeout_s
        )
        return "LINK " in listed.output

    async def _base_version(self, sandbox: Sandbox, task: GradableTask, path: str) -> bytes | None:
        scratch = f"{self._config.scratch_dir}/config-base"
        shown = await sandbox.exec(
            f"mkdir -p {scratch} && git show {shlex.quote(f'{task.base_commit}:{path}')} "
            f"> {scratch}/file 2>/dev/null",
            timeout_s=self._config.git_timeout_s,
        )
        return await sandbox.read_file(f"{scratch}/file") if shown.exit_code == 0 else None

    async def _pytest_settings_changed(
        self, sandbox: Sandbox, task: GradableTask, path: str
    ) -> bool:
        base = await self._base_version(sandbox, task, path)
        patched = await read_optional(sandbox, path)
        return pytest_settings_changed(path, base, patched)


def _task_tests(ids: Iterable[str], canary: Canary | None) -> set[str]:
    """The task's test ids among `ids` (the canaries left out)."""
    return {test_id for test_id in ids if canary is None or not canary.is_canary(test_id)}


def _task_test_files(task: GradableTask) -> list[str]:
    return task_test_files(task)
