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
]


@dataclass(frozen=True, slots=True)
class ExecResult:
    """The outcome of one command.

    `exit_code` is the command's status (124/137 after a timeout kill, as coreutils `timeout`
    reports). `output` is stdout and stderr interleaved, decoded with replacement characters and
    capped head+tail (`truncated` says whether bytes were elided; `output_bytes` is the size
    before capping).
    """

    exit_code: int
    output: str
    timed_out: bool
    duration_s: float
    truncated: bool = False
    output_bytes: int = 0

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

    async def read_file(self, path: str) -> bytes:
        """Return the bytes of `path`; raises FileNotFoundError if it does not exist."""
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
    """

    def __init__(self, cap: OutputCap) -> None:
        self._cap = cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0

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
        return cap_output(bytes(self._head + self._tail), self._cap, total_bytes=self.total_bytes)


# `timeout` makes itself a process-group leader; when it returns, everything the command left in
# that group (a background job, a fork bomb) is killed, so the next command finds a clean sandbox
# and no leftover process holds the output pipe open. `kill` is a bash builtin: it works even when
# the pids limit forbids forking. A process that left the group (`setsid`, a double fork into a
# new session) still carries the command's tag in its environment: one `grep` over
# /proc/*/environ finds it and it is killed too. (Only the command's processes carry the tag; a
# process that clears its own environment on purpose is not found.)
_REAP_GROUP_SCRIPT = (
    'CONDUCTOR_EXEC_TAG="$4" timeout -k "$1" "$2" bash -c "$3" & pid=$!; wait "$pid"; rc=$?; '
    'kill -9 -- "-$pid" 2>/dev/null; kill -9 -- "-$pid" 2>/dev/null; '
    r'for f in $(grep -lsz "^CONDUCTOR_EXEC_TAG=$4\$" /proc/[0-9]*/environ 2>/dev/null); do '
    'p=${f#/proc/}; kill -9 "${p%/environ}" 2>/dev/null; done; exit "$rc"'
)


def command_argv(cmd: str, *, timeout_s: float, kill_grace_s: float) -> list[str]:
    """The argv both backends run: `cmd` under `timeout -k`; its processes reaped after, the
    ones that left its process group included (found by a per-command tag)."""
    return [
        "bash",
        "-c",
        _REAP_GROUP_SCRIPT,
        "conductor-exec",
        f"{kill_grace_s:g}",
        f"{timeout_s:g}",
        cmd,
        secrets.token_hex(8),
    ]


# coreutils `timeout` exits 124 after SIGTERM worked and 137 (128+KILL) after `-k` had to kill.
_TIMEOUT_EXIT_CODES = (124, 137)


def is_timeout_exit(exit_code: int, duration_s: float, timeout_s: float) -> bool:
    """Whether a command ended because its timeout fired (not because it exited 124 itself, or
    was OOM-killed with 137 long before its deadline)."""
    return exit_code in _TIMEOUT_EXIT_CODES and duration_s >= timeout_s
