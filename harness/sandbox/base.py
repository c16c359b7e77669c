"""The `Sandbox` protocol: where an agent's actions run, and what comes back.

A sandbox executes shell commands and reads/writes files. Failures of the *command* (non-zero
exit, timeout, OOM kill, huge output) are values in `ExecResult`; only failures of the sandbox
itself (it died, it cannot be reached) raise `SandboxError`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "ExecResult",
    "OutputCap",
    "OutputWindow",
    "Sandbox",
    "cap_output",
    "command_argv",
    "is_timeout_exit",
    "kill_tagged_argv",
    "new_exec_tag",
]


@dataclass(frozen=True, slots=True)
class ExecResult:
    """The outcome of one command.

    `exit_code` is the command's status (124/137 after a timeout kill, as coreutils `timeout`
    reports). `output` is stdout and stderr interleaved, decoded with replacement characters and
    capped head+tail (`truncated` says whether bytes were elided; `output_bytes` is the size
    before capping). `output_limited`: the command printed more than the output limit and was
    killed there (`ExecLimits.max_output_mb`), at the source rather than read to its end.
    """

    exit_code: int
    output: str
    timed_out: bool
    duration_s: float
    truncated: bool = False
    output_bytes: int = 0
    output_limited: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True, slots=True)
class OutputCap:
    """How much of a command's output is kept: the first `head_bytes` and last `tail_bytes`."""

    head_bytes: int = 16_384
    tail_bytes: int = 16_384


def cap_output(data: bytes, cap: OutputCap, total_bytes: int | None = None) -> tuple[str, bool]:
    """Keep head and tail of `data` with an elision note; returns (text, truncated).

    `total_bytes` is the real size when `data` is already a head+tail window of a larger stream.
    """
    total = len(data) if total_bytes is None else total_bytes
    keep = cap.head_bytes + cap.tail_bytes
    if total <= keep and len(data) == total:
        return data.decode("utf-8", errors="replace"), False
    head = data[: cap.head_bytes]
    tail = data[-cap.tail_bytes :] if cap.tail_bytes else b""
    elided = total - len(head) - len(tail)
    note = f"\n[... {elided} bytes elided ...]\n"
    text = head.decode("utf-8", errors="replace") + note + tail.decode("utf-8", errors="replace")
    return text, True


@runtime_checkable
class Sandbox(Protocol):
    """An isolated place to run an agent's commands (a Docker container, or a local directory)."""

    @property
    def workdir(self) -> str:
        """The default working directory of commands (e.g. `/testbed`)."""
        ...

    async def exec(
        self,
        cmd: str,
        *,
        timeout_s: float,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run `cmd` with `bash -c`; kill it (and its children) after `timeout_s` seconds."""
        ...

    async def write_file(self, path: str, content: bytes) -> None:
        """Create or replace `path` (absolute, or relative to `workdir`), creating parent dirs."""
        ...

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Return the bytes of `path`; raises FileNotFoundError if it does not exist, and
        `FileTooLargeError` (without reading it) if it is larger than `max_bytes`."""
        ...

    async def is_alive(self) -> bool:
        """Whether the sandbox can still run commands."""
        ...

    async def aclose(self) -> None:
        """Destroy the sandbox; idempotent."""
        ...


class OutputWindow:
    """Collects a stream's bytes keeping only the first `head_bytes` and the last `tail_bytes`.

    Memory stays bounded however much a command prints (a 50 MB print costs 32 KiB here).
    `full` turns true once more than `stop_after_bytes` arrived (0: never): the reader then
    stops the command instead of reading on (`ExecLimits.max_output_mb`).
    """

    def __init__(self, cap: OutputCap, stop_after_bytes: int = 0) -> None:
        self._cap = cap
        self._stop_after_bytes = stop_after_bytes
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0

    @property
    def full(self) -> bool:
        return 0 < self._stop_after_bytes < self.total_bytes

    def feed(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        room = self._cap.head_bytes - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self._cap.tail_bytes:
            self._tail += chunk
            if len(self._tail) > self._cap.tail_bytes:
                del self._tail[: len(self._tail) - self._cap.tail_bytes]

    def render(self) -> tuple[str, bool]:
        """The captured text with an elision note if bytes were dropped; (text, truncated)."""
        text, truncated = cap_output(
            bytes(self._head + self._tail), self._cap, total_bytes=self.total_bytes
        )
        if self.full:
            limit_mib = self._stop_after_bytes / 2**20
            text += f"\n[the command was stopped: it printed more than {limit_mib:g} MiB]\n"
        return text, truncated


# `timeout` makes itself a process-group leader; when it returns, everything the command left in
# that group (a background job, a fork bomb) is killed, so the next command finds a clean sandbox
# and no leftover process holds the output pipe open. `kill` is a bash builtin: it works even when
# the pids limit forbids forking. A process that left the group (`setsid`, a double fork into a
# new session) still carries the command's tag in its environment: one `grep` over
# /proc/*/environ finds it and it is killed too. (Only the command's processes carry the tag; a
# process that clears its own environment on purpose is not found.)
_KILL_TAGGED_LOOP = (
    r'for f in $(grep -lsz "^CONDUCTOR_EXEC_TAG=$tag\$" /proc/[0-9]*/environ 2>/dev/null); do '
    'p=${f#/proc/}; kill -9 "${p%/environ}" 2>/dev/null; done'
)
_REAP_GROUP_SCRIPT = (
    'tag="$4"; CONDUCTOR_EXEC_TAG="$tag" timeout -k "$1" "$2" bash -c "$3" & pid=$!; '
    'wait "$pid"; rc=$?; kill -9 -- "-$pid" 2>/dev/null; kill -9 -- "-$pid" 2>/dev/null; '
    f'{_KILL_TAGGED_LOOP}; exit "$rc"'
)
_KILL_TAGGED_SCRIPT = f'tag="$1"; {_KILL_TAGGED_LOOP}'


def new_exec_tag() -> str:
    """A fresh tag for one command's processes (see `command_argv`)."""
    return secrets.token_hex(8)


def command_argv(cmd: str, *, timeout_s: float, kill_grace_s: float, tag: str) -> list[str]:
    """The argv both backends run: `cmd` under `timeout -k`; its processes reaped after, the
    ones that left its process group included (found by `tag`, from `new_exec_tag`)."""
    return [
        "bash",
        "-c",
        _REAP_GROUP_SCRIPT,
        "conductor-exec",
        f"{kill_grace_s:g}",
        f"{timeout_s:g}",
        cmd,
        tag,
    ]


def kill_tagged_argv(tag: str) -> list[str]:
    """The argv that SIGKILLs every process of the command tagged `tag` (run beside it, when
    the command must stop before its timeout: it printed more than the output limit)."""
    return ["bash", "-c", _KILL_TAGGED_SCRIPT, "conductor-kill", tag]


# coreutils `timeout` exits 124 after SIGTERM worked and 137 (128+KILL) after `-k` had to kill.
_TIMEOUT_EXIT_CODES = (124, 137)


def is_timeout_exit(exit_code: int, duration_s: float, timeout_s: float) -> bool:
    """Whether a command ended because its timeout fired (not because it exited 124 itself, or
    was OOM-killed with 137 long before its deadline)."""
    return exit_code in _TIMEOUT_EXIT_CODES and duration_s >= timeout_s
