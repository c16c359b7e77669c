"""The shell scripts the grader runs in sandboxes (pure string building, no I/O).

Every script uses paths relative to the sandbox workdir and quotes every value it interpolates.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from envs.swe.config import GradingConfig
from envs.swe.test_command import PytestCommand

__all__ = [
    "APPLY_METHOD_PREFIX",
    "GIT",
    "PROBE_STATUS_PREFIX",
    "LaunchPaths",
    "apply_method",
    "apply_script",
    "prepare_tests_script",
    "probe_script",
    "restore_one",
    "symlinks_script",
    "test_run_script",
]

APPLY_METHOD_PREFIX = "APPLY_METHOD="
PROBE_STATUS_PREFIX = "PROBE_STATUS="
# git as the grader runs it: settings of the repository (which the agent controls) that would
# change what a diff looks like are overridden; external diff drivers and textconv are off.
GIT = (
    "git -c core.quotepath=off -c color.ui=never -c diff.noprefix=false "
    "-c diff.mnemonicPrefix=false -c diff.relative=false"
)


@dataclass(frozen=True, slots=True)
class LaunchPaths:
    """A hardened run's launcher (workdir-relative path) and its spec (a JSON text)."""

    launcher: str
    spec: str


def restore_one(base_commit: str) -> str:
    """Shell code that puts "$f" back as it is in `base_commit` (or removes it if absent)."""
    base = shlex.quote(base_commit)
    return (
        f'if git cat-file -e {base}:"$f" 2>/dev/null; then git checkout -q {base} -- "$f"; '
        'else rm -rf -- "$f"; fi'
    )


def apply_script(patch_path: str, fuzz_lines: int) -> str:
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
        f"if {command} 2>&1; then echo; echo {APPLY_METHOD_PREFIX}{name}; exit 0; fi; {reset}"
        for name, command in attempts
    ]
    return "\n".join([*lines, "exit 1"])


def apply_method(output: str) -> str | None:
    """The method the apply script reported (the last marker, wherever it lands in a line)."""
    found = re.findall(rf"{re.escape(APPLY_METHOD_PREFIX)}(\w+)", output)
    return found[-1] if found else None


def prepare_tests_script(base_commit: str, test_files: list[str], test_patch_path: str) -> str:
    """Restore every test file to `base_commit` (remove the ones it lacks), then `test_patch`."""
    files = " ".join(shlex.quote(path) for path in test_files)
    loop = f"for f in {files}; do {restore_one(base_commit)} || exit 3; done" if test_files else ":"
    return f"{loop}\ngit apply --verbose {shlex.quote(test_patch_path)} || exit 3"


def probe_script(
    prepare: str,
    test_patch_path: str,
    env_setup: str,
    command: PytestCommand,
    launcher: str,
    out: str,
    copy: str,
    config: GradingConfig,
) -> str:
    """On the pristine tree: apply `test_patch` (`prepare`), ask the launcher's `--probe` which
    configuration pytest picks, then take `test_patch` back off. Exits 3 when `test_patch` does
    not apply (either way); the probe's own status travels as a marker (its failure is not the
    grading's)."""
    lines = [prepare]
    if env_setup.strip():
        lines.append(f"( {env_setup}\n{_probe_line(command, launcher, out, copy, config)} )")
    else:
        lines.append(f"( {_probe_line(command, launcher, out, copy, config)} )")
    lines.append("probe=$?")
    lines.append(f"git apply -R {shlex.quote(test_patch_path)} || exit 3")
    lines.append(f"echo; echo {PROBE_STATUS_PREFIX}$probe")
    return "\n".join(lines)


def _probe_line(
    command: PytestCommand, launcher: str, out: str, copy: str, config: GradingConfig
) -> str:
    timeout = f"timeout -k {config.kill_grace_s:g} {config.probe_timeout_s:g}"
    assignments = " ".join(shlex.quote(f"{name}={value}") for name, value in command.env)
    args = " ".join(shlex.quote(arg) for arg in command.args)
    probe = " ".join(shlex.quote(part) for part in (launcher, "--probe", out, copy))
    return "\n".join(
        [
            *_interpreter_lines(command),
            f"env -u PYTEST_ADDOPTS -u PYTEST_PLUGINS {assignments} {timeout} $py -I {probe} "
            f"-- {args} > {shlex.quote(out + '.log')} 2>&1 < /dev/null",
        ]
    )


def symlinks_script(path_list: str) -> str:
    """Print `LINK <path>` for each NUL-terminated path of `path_list` that is a symlink."""
    return (
        "while IFS= read -r -d '' f; do "
        'if [ -L "$f" ]; then printf \'LINK %s\\n\' "$f"; fi; '
        f"done < {shlex.quote(path_list)}"
    )


def test_run_script(
    test_command: str,
    env_setup: str,
    log_path: str,
    config: GradingConfig,
    *,
    pytest_command: PytestCommand | None = None,
    launch: LaunchPaths | None = None,
) -> str:
    """Run the tests into `log_path` under an in-sandbox timeout; the script exits with their code.

    With `pytest_command` and `launch`, pytest runs through the launcher (`python -I`, the
    image's pytest pinned, the pristine configuration, the report and canaries); otherwise the
    command runs as written.
    Nothing secret is on a command line: the exit code travels as the exec's own status.
    """
    log = shlex.quote(log_path)
    timeout = f"timeout -k {config.kill_grace_s:g} {config.test_timeout_s:g}"
    lines = [env_setup] if env_setup.strip() else []
    if pytest_command is not None and launch is not None:
        lines.extend(_interpreter_lines(pytest_command))
        assignments = " ".join(shlex.quote(f"{name}={value}") for name, value in pytest_command.env)
        args = " ".join(shlex.quote(arg) for arg in pytest_command.args)
        launcher = " ".join(shlex.quote(p) for p in (launch.launcher, launch.spec))
        lines.append(
            f"env -u PYTEST_ADDOPTS -u PYTEST_PLUGINS {assignments} {timeout} $py -I {launcher} "
            f"-- {args} > {log} 2>&1 < /dev/null"
        )
    else:
        lines.append(f"{timeout} bash -c {shlex.quote(test_command)} > {log} 2>&1 < /dev/null")
    half = config.max_log_bytes // 2
    lines.append("rc=$?")
    lines.append(
        f'if [ "$(wc -c < {log})" -gt {config.max_log_bytes} ]; then '
        f"{{ head -c {half} {log}; printf '\\n[... log elided ...]\\n'; tail -c {half} {log}; }} "
        f"> {log}.cut && mv {log}.cut {log}; fi"
    )
    lines.append('exit "$rc"')
    return "\n".join(lines)


def _interpreter_lines(command: PytestCommand) -> list[str]:
    """Set `$py` to the interpreter: the named one, or the `#!` line of the pytest script."""
    if command.interpreter is not None:
        return [f"py={shlex.quote(command.interpreter)}"]
    return [
        f"runner=$(command -v {shlex.quote(command.script or 'pytest')}) || exit 127",
        'first=$(head -n 1 "$runner")',
        "case \"$first\" in '#!'*) py=${first#??} ;; *) py=python3 ;; esac",
    ]
