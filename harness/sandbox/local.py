"""`LocalSandbox`: the Sandbox protocol over subprocesses in a temporary directory.

NOT ISOLATED. Commands run as the current user on this machine, with its network and its whole
file system. Use it only where no Docker engine exists (a laptop demo, the embedded default run
on a machine without Docker) and only with trusted actions. The logical `workdir` (e.g.
`/testbed`) is mapped onto the directory, for file reads/writes and as the commands' cwd; a
command that names `/testbed` literally sees the real `/testbed` of the host, not the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from harness.errors import FileTooLargeError, SandboxDeadError, SandboxError
from harness.sandbox.base import (
    ExecResult,
    OutputCap,
    OutputWindow,
    command_argv,
    is_timeout_exit,
    kill_tagged_argv,
    new_exec_tag,
)
from harness.sandbox.limits import ExecLimits

__all__ = ["LocalSandbox"]

_READ_CHUNK_BYTES = 65_536


class LocalSandbox:
    """Runs commands with `bash -c` under coreutils `timeout -k` in a private directory."""

    def __init__(
        self,
        root_dir: Path | None = None,
        *,
        workdir: str = "/testbed",
        limits: ExecLimits | None = None,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self._owns_root = root_dir is None
        self._root = (
            Path(tempfile.mkdtemp(prefix="conductor-local-")) if root_dir is None else root_dir
        )
        self._root.mkdir(parents=True, exist_ok=True)
        self._workdir = workdir
        self._limits = limits or ExecLimits()
        self._base_env = dict(base_env or {})
        self._closed = False

    @property
    def workdir(self) -> str:
        return self._workdir

    @property
    def root(self) -> Path:
        """The host directory that stands for `workdir`."""
        return self._root

    def host_path(self, path: str) -> Path:
        """Map a sandbox path (absolute under `workdir`, or relative to it) to a host path."""
        posix = PurePosixPath(path)
        if posix.is_absolute():
            try:
                posix = posix.relative_to(self._workdir)
            except ValueError as exc:
                raise SandboxError(
                    f"LocalSandbox only maps paths under {self._workdir}; got {path!r}"
                ) from exc
        resolved = (self._root / posix).resolve()
        if resolved != self._root.resolve() and self._root.resolve() not in resolved.parents:
            raise SandboxError(f"path {path!r} escapes the sandbox directory")
        return resolved

    async def exec(
        self,
        cmd: str,
        *,
        timeout_s: float,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        self._check_open()
        cwd = self.host_path(workdir or self._workdir)
        full_env = {**os.environ, **self._base_env, **(env or {})}
        tag = new_exec_tag()
        argv = command_argv(
            cmd, timeout_s=timeout_s, kill_grace_s=self._limits.kill_grace_s, tag=tag
        )
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=full_env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        window = OutputWindow(
            OutputCap(self._limits.output_head_bytes, self._limits.output_tail_bytes),
            stop_after_bytes=self._limits.max_output_bytes,
        )
        host_deadline_s = timeout_s + self._limits.kill_grace_s + self._limits.host_grace_s
        host_killed = False
        try:
            async with asyncio.timeout(host_deadline_s):
                assert process.stdout is not None
                stopped = False
                while chunk := await process.stdout.read(_READ_CHUNK_BYTES):
                    window.feed(chunk)
                    if window.full and not stopped:  # kill it at the source; drain the rest
                        stopped = True
                        await _kill_tagged(tag)
                await process.wait()
        except TimeoutError:
            host_killed = True
        finally:
            # Normally the command's wrapper has reaped its process group already; after a host
            # deadline or a cancellation, kill the whole session here.
            _kill_group(process.pid)
            await process.wait()
        exit_code = process.returncode if process.returncode is not None else -9
        duration_s = time.monotonic() - started
        text, truncated = window.render()
        return ExecResult(
            exit_code=exit_code,
            output=text,
            timed_out=host_killed or is_timeout_exit(exit_code, duration_s, timeout_s),
            duration_s=duration_s,
            truncated=truncated,
            output_bytes=window.total_bytes,
            output_limited=window.full,
        )

    async def write_file(self, path: str, content: bytes) -> None:
        self._check_open()
        target = self.host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(target.write_bytes, content)

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        self._check_open()
        target = self.host_path(path)
        if not target.is_file():
            raise FileNotFoundError(f"{path} does not exist in the sandbox")
        if max_bytes is not None:
            size = target.stat().st_size
            if size > max_bytes:
                raise FileTooLargeError(path, size, max_bytes)
        return await asyncio.to_thread(target.read_bytes)

    async def is_alive(self) -> bool:
        return not self._closed and self._root.is_dir()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_root:
            await asyncio.to_thread(shutil.rmtree, self._root, True)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxDeadError("the local sandbox is closed")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


async def _kill_tagged(tag: str) -> None:
    """SIGKILL the processes of the command tagged `tag` (its wrapper then exits)."""
    killer = await asyncio.create_subprocess_exec(
        *kill_tagged_argv(tag), stdin=asyncio.subprocess.DEVNULL
    )
    await killer.wait()
