"""`DockerSandbox`: the Sandbox protocol on a locked-down Docker container.

The container runs docker-init (tini) as PID 1 (`ContainerLimits.init`, `docker run --init`),
which reaps orphaned processes; under it a `sh` loop of short sleeps keeps the container up for
its ttl (`_keepalive_command`). Both run as `keepalive_user` (nobody) while commands run as
`user` (root by default), and every capability is dropped: without CAP_KILL a command cannot
signal another user's processes, so one that kills every process it can (`kill -9 -1`) ends
only its own and cannot take the container down to pass its failure off as an
infrastructure error. (With neither init nor a keepalive user, PID 1 is the loop itself,
which cannot be killed from inside its PID namespace.) It runs with `--network none`,
CPU/memory/pids limits, `cap_drop=ALL` and
`no-new-privileges`. Every command is a fresh `docker exec` of
`timeout -k <grace> <t> bash -c <cmd>`, so the process is killed *inside* the container; the
host waits a little longer and, if even that passes, declares the container dead (a host-side
timeout alone leaves the process running: reference/swe-envs.md §7).

docker-py is synchronous; every call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import math
import secrets
import shlex
import tarfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeVar

import docker
import docker.errors
import docker.tls
import requests
import urllib3
from docker.models.containers import Container
from docker.types import Mount, Ulimit

from harness.errors import (
    DockerUnavailableError,
    FileTooLargeError,
    ImageNotFoundError,
    SandboxDeadError,
    SandboxError,
)
from harness.sandbox.base import (
    ExecResult,
    OutputCap,
    OutputWindow,
    command_argv,
    is_timeout_exit,
    kill_tagged_argv,
    new_exec_tag,
)
from harness.sandbox.docker_frames import exec_frames
from harness.sandbox.docker_removal import RemovalOutcome, remove_container_blocking
from harness.sandbox.labels import owner_labels
from harness.sandbox.limits import AUTO_USER, ContainerLimits, ExecLimits, resolve_user

T = TypeVar("T")
log = logging.getLogger(__name__)

__all__ = [
    "DockerSandbox",
    "docker_call",
    "docker_client",
    "docker_client_at",
    "new_container_name",
    "remove_container_named",
    "storage_quota_supported",
]

# Environment every command sees: no pagers or colour codes in observations.
_COMMAND_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb", "TQDM_DISABLE": "1"}


def docker_client(timeout_s: float = 120.0) -> docker.DockerClient:
    """A client for the local engine (DOCKER_HOST is honoured); raises SandboxError if none."""
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(
            "cannot reach a Docker engine; start one (`sudo dockerd &` or "
            "`sudo systemctl start docker`) or use the local sandbox backend"
        ) from exc
    return client


def docker_client_at(
    base_url: str,
    *,
    api_version: str,
    tls: docker.tls.TLSConfig | None = None,
    timeout_s: float = 120.0,
) -> docker.DockerClient:
    """A client for the daemon at `base_url` (a DOCKER_HOST URL), made without asking it
    anything: the API version is pinned, so a host that is down now is found down when it is
    first used (as a `DockerUnavailableError`), not while the pool is being built."""
    try:
        return docker.DockerClient(
            base_url=base_url, version=api_version, tls=tls or False, timeout=int(timeout_s)
        )
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot make a Docker client for {base_url}: {exc}") from exc


class DockerSandbox:
    """One container. Create with `await DockerSandbox.create(client, image, ...)`."""

    def __init__(
        self,
        client: docker.DockerClient,
        container: Container,
        workdir: str,
        exec_limits: ExecLimits,
        *,
        check_reads: bool = False,
        exec_user: str = "",
    ) -> None:
        self._client = client
        self._container = container
        self._workdir = workdir
        self._exec_limits = exec_limits
        self._check_reads = check_reads  # commands run as a user who cannot read everything
        self._exec_user = exec_user  # "" : the container's own user
        self._closed = False
        self._removal_pending = False
        self._daemon_lost = False
        self._dead_reason: str | None = None

    @classmethod
    async def create(
        cls,
        client: docker.DockerClient,
        image: str,
        *,
        workdir: str = "/testbed",
        limits: ContainerLimits | None = None,
        exec_limits: ExecLimits | None = None,
        wall_time: Callable[[], float] = time.time,
        role: str = "sandbox",
        name: str | None = None,
    ) -> DockerSandbox:
        """Start a container from `image` and return its sandbox once it runs.

        `name` (unique, e.g. from `new_container_name`) lets a caller find the container again
        when the daemon created it but its answer was lost (`DockerUnavailableError`).
        """
        limits = limits or ContainerLimits()
        if limits.user == AUTO_USER:  # the image's agent user, if it names one, else root
            labels = await docker_call(_image_labels, client, image)
            limits = limits.model_copy(update={"user": resolve_user(limits.user, labels)})
        container = await docker_call(
            _run_container,
            client,
            image,
            workdir,
            limits,
            owner_labels(wall_time(), limits.ttl_s, role),
            name,
        )
        return cls(
            client,
            container,
            workdir,
            exec_limits or ExecLimits(),
            check_reads=bool(limits.user),
            exec_user=_exec_user(limits),
        )

    @property
    def workdir(self) -> str:
        return self._workdir

    @property
    def container_id(self) -> str:
        return str(self._container.id)

    async def exec(
        self,
        cmd: str,
        *,
        timeout_s: float,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        self._check_usable()
        limits = self._exec_limits
        tag = new_exec_tag()
        argv = command_argv(cmd, timeout_s=timeout_s, kill_grace_s=limits.kill_grace_s, tag=tag)
        window = OutputWindow(
            OutputCap(limits.output_head_bytes, limits.output_tail_bytes),
            stop_after_bytes=limits.max_output_bytes,
        )
        started = time.monotonic()
        host_deadline_s = timeout_s + limits.kill_grace_s + limits.host_grace_s
        try:
            async with asyncio.timeout(host_deadline_s):
                exit_code = await self._call(
                    self._exec_blocking,
                    argv,
                    workdir or self._workdir,
                    {**_COMMAND_ENV, **(env or {})},
                    window,
                    tag,
                )
        except TimeoutError:
            # The in-container timeout did not end it: the container is no longer trustworthy.
            self._dead_reason = f"command outlived its host deadline of {host_deadline_s:g} s"
            await self._remove_quietly()
            raise SandboxDeadError(self._dead_reason) from None
        duration_s = time.monotonic() - started
        text, truncated = window.render()
        return ExecResult(
            exit_code=exit_code,
            output=text,
            timed_out=is_timeout_exit(exit_code, duration_s, timeout_s),
            duration_s=duration_s,
            truncated=truncated,
            output_bytes=window.total_bytes,
            output_limited=window.full,
        )

    async def write_file(self, path: str, content: bytes) -> None:
        self._check_usable()
        target = self._absolute(path)
        staged = _on_tmpfs(target)
        owner = await self._prepare_write(target, staging=staged)
        landing = PurePosixPath(_STAGING_DIR) / secrets.token_hex(8) if staged else target
        # Off the loop: the content may be megabytes (an editor write).
        archive = await asyncio.to_thread(_single_file_tar, landing.name, content, owner)
        try:
            ok = await self._call(self._container.put_archive, str(landing.parent), archive)
        except docker.errors.NotFound as exc:
            raise self._died(exc) from exc
        except docker.errors.APIError as exc:
            raise SandboxError(f"could not write {target}: {exc.explanation}") from exc
        if not ok:
            raise SandboxError(f"could not write {target}")
        if staged:  # the copy API cannot reach a tmpfs mount: move it in from inside
            moved = await self.exec(
                f"mv -f {shlex.quote(str(landing))} {shlex.quote(str(target))} || "
                f"{{ rm -f {shlex.quote(str(landing))}; exit 1; }}",
                timeout_s=self._exec_limits.file_op_timeout_s,
            )
            if moved.exit_code != 0:
                raise SandboxError(f"could not write {target}: {moved.output.strip()}")

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        self._check_usable()
        target = self._absolute(path)
        if self._check_reads:  # the archive API reads as root: read only what the user may
            readable = await self.exec(
                f"test ! -e {shlex.quote(str(target))} || test -r {shlex.quote(str(target))}",
                timeout_s=self._exec_limits.file_op_timeout_s,
            )
            if readable.exit_code != 0:
                raise SandboxError(f"permission denied: {target} is not readable by the user")
        source = target
        if _on_tmpfs(target):  # copy it out of the tmpfs mount, where the copy API can read
            source = PurePosixPath(_STAGING_DIR) / secrets.token_hex(8)
            copied = await self.exec(
                f"test -f {shlex.quote(str(target))} && mkdir -p {_STAGING_DIR} && "
                f"cp {shlex.quote(str(target))} {shlex.quote(str(source))}",
                timeout_s=self._exec_limits.file_op_timeout_s,
            )
            if copied.exit_code != 0:
                raise FileNotFoundError(f"{target} does not exist in the sandbox")
        try:
            return await self._call(self._read_blocking, str(source), max_bytes)
        except FileTooLargeError as exc:
            raise FileTooLargeError(str(target), exc.size_bytes, exc.max_bytes) from None
        except docker.errors.NotFound as exc:
            if await self.is_alive():
                raise FileNotFoundError(f"{target} does not exist in the sandbox") from exc
            raise self._died(exc) from exc
        finally:
            if source != target:
                await self.exec(
                    f"rm -f {shlex.quote(str(source))}",
                    timeout_s=self._exec_limits.file_op_timeout_s,
                )

    async def is_alive(self) -> bool:
        if self._closed or self._dead_reason is not None:
            return False
        try:
            await self._call(self._container.reload)
        except docker.errors.NotFound:
            return False
        except SandboxDeadError:
            return False  # the daemon did not answer: its containers cannot be trusted
        return self._container.status == "running"

    @property
    def daemon_lost(self) -> bool:
        """The sandbox died because the daemon stopped answering (its siblings are dead too)."""
        return self._daemon_lost

    @property
    def removal_pending(self) -> bool:
        """The container was closed while the daemon was away and still exists."""
        return self._removal_pending

    async def aclose(self) -> None:
        """Remove the container. Idempotent; a removal the daemon could not take (it was down)
        is tried again by the next call (the pool closes every sandbox once more at its end)."""
        if self._closed and not self._removal_pending:
            return
        self._closed = True
        await self._remove_quietly()

    async def _prepare_write(self, target: PurePosixPath, *, staging: bool = False) -> _FileOwner:
        """Create `target`'s directory; return the mode and owner to write it with.

        A replaced file keeps its mode and owner (an edited script stays executable, as with
        `LocalSandbox`); a new one is 0644, owned by the command user. The archive then holds
        the file alone, so no existing directory has its mode or owner reset by the extraction.
        """
        parent, name = shlex.quote(str(target.parent)), shlex.quote(str(target))
        stage = f" {_STAGING_DIR}" if staging else ""
        # The archive API writes as the daemon (root, any path): the check runs as the command
        # user, so the file tools may write only where bash could.
        script = (
            f"mkdir -p {parent}{stage} || exit 1; "
            f"if [ -e {name} ]; then [ -w {name} ] || {{ echo denied; exit 0; }}; "
            f"stat -L -c '%a %u %g' {name}; "
            f"else [ -w {parent} ] || {{ echo denied; exit 0; }}; "
            'echo "644 $(id -u) $(id -g)"; fi'
        )
        result = await self.exec(script, timeout_s=self._exec_limits.file_op_timeout_s)
        if result.exit_code != 0:
            raise SandboxError(
                f"could not create the directory {target.parent}: {result.output.strip()}"
            )
        fields = result.output.split()
        if fields == ["denied"]:
            raise SandboxError(f"permission denied: {target} is not writable by the sandbox user")
        if len(fields) == 3:
            return _FileOwner(int(fields[0], 8), int(fields[1]), int(fields[2]))
        raise SandboxError(f"could not prepare {target}: {result.output.strip()!r}")

    # -- blocking helpers (worker threads) ----------------------------------------------------

    def _exec_blocking(
        self, argv: list[str], workdir: str, env: dict[str, str], window: OutputWindow, tag: str
    ) -> int:
        api = self._client.api
        try:
            exec_id = api.exec_create(
                self._container.id,
                argv,
                stdout=True,
                stderr=True,
                stdin=False,
                workdir=workdir,
                environment=env,
                user=self._exec_user,
            )["Id"]
            stopped = False
            for chunk in exec_frames(api.exec_start(exec_id, socket=True)):
                window.feed(chunk)
                if window.full and not stopped:  # kill it at the source; drain what is in flight
                    stopped = True
                    # From another thread: this one keeps draining the stream meanwhile (a
                    # daemon blocked on writing it can stall the kill's own exec otherwise).
                    killer = threading.Thread(
                        target=self._kill_tagged_blocking, args=(tag,), daemon=True
                    )
                    killer.start()
            exit_code = api.exec_inspect(exec_id)["ExitCode"]
        except docker.errors.NotFound as exc:
            raise self._died(exc) from exc
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # "container is not running"
                raise self._died(exc) from exc
            raise SandboxError(f"docker exec failed: {exc.explanation}") from exc
        if exit_code is None:
            raise self._died(RuntimeError("exec ended without an exit code"))
        return int(exit_code)

    def _kill_tagged_blocking(self, tag: str) -> None:
        """SIGKILL the processes of the command tagged `tag` (errors: the container is going)."""
        api = self._client.api
        with contextlib.suppress(docker.errors.DockerException, *_TRANSPORT_ERRORS):
            kill_id = api.exec_create(
                self._container.id, kill_tagged_argv(tag), user=self._exec_user
            )["Id"]
            api.exec_start(kill_id)

    def _read_blocking(self, path: str, max_bytes: int | None = None) -> bytes:
        stream, stat = self._container.get_archive(path)
        size = int(stat.get("size", 0))
        if max_bytes is not None and size > max_bytes:
            # The body is never read: dropping the unstarted generator drops the response, whose
            # connection is closed rather than handed back half-read.
            del stream
            raise FileTooLargeError(path, size, max_bytes)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.next()
            if member is None or not member.isfile():
                raise FileNotFoundError(f"{path} is not a regular file")
            extracted = archive.extractfile(member)
            assert extracted is not None
            return extracted.read()

    # -- internals ----------------------------------------------------------------------------

    def _absolute(self, path: str) -> PurePosixPath:
        posix = PurePosixPath(path)
        return posix if posix.is_absolute() else PurePosixPath(self._workdir) / posix

    async def _call(self, blocking: Callable[..., T], *args: Any) -> T:
        """Run a docker-py call in a thread; a daemon that does not answer kills this sandbox
        (a restarted daemon has stopped its containers), as a `SandboxDeadError`."""
        try:
            return await docker_call(blocking, *args)
        except DockerUnavailableError as exc:
            self._daemon_lost = True
            raise self._died(exc) from exc

    def _check_usable(self) -> None:
        if self._closed:
            raise SandboxDeadError("the sandbox is closed")
        if self._dead_reason is not None:
            raise SandboxDeadError(self._dead_reason)

    def _died(self, cause: BaseException) -> SandboxDeadError:
        self._dead_reason = f"container {self.container_id[:12]} is gone: {cause}"
        return SandboxDeadError(self._dead_reason)

    async def _remove_quietly(self) -> None:
        self._removal_pending = False
        try:
            outcome = await asyncio.to_thread(
                remove_container_blocking, self._client, self.container_id
            )
        except docker.errors.APIError as exc:
            raise SandboxError(f"could not remove container {self.container_id[:12]}") from exc
        except _TRANSPORT_ERRORS:
            self._removal_pending = True  # the daemon is away: the next aclose() tries again
            return
        if outcome is RemovalOutcome.BUSY:
            # Being removed elsewhere, or (right after a daemon restart) still being set up or
            # torn down: the next aclose() looks again, so it is never left behind silently.
            self._removal_pending = True


_KEEPALIVE_STEP_S = 10
_TMPFS_MOUNTS = ("/tmp",)
"""Mounted as tmpfs in every container (`_run_container`); the archive API does not see them."""
_STAGING_DIR = "/var/tmp/.conductor-io"
"""On the container's own filesystem: where files to and from a tmpfs mount pass through."""


def _on_tmpfs(path: PurePosixPath) -> bool:
    return any(path == PurePosixPath(m) or PurePosixPath(m) in path.parents for m in _TMPFS_MOUNTS)


_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    urllib3.exceptions.HTTPError,
    ConnectionError,
)


async def docker_call(blocking: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`blocking(*args, **kwargs)` in a worker thread; transport failures become
    `DockerUnavailableError` (docker-py raises `requests` / `urllib3` errors for them, which
    nothing else expects)."""
    try:
        return await asyncio.to_thread(blocking, *args, **kwargs)
    except docker.errors.DockerException:
        raise
    except _TRANSPORT_ERRORS as exc:
        raise DockerUnavailableError(
            f"the Docker daemon did not answer ({type(exc).__name__}: {exc}); check that dockerd "
            "is running (`docker info`)"
        ) from exc


def _image_labels(client: docker.DockerClient, image: str) -> dict[str, str]:
    """The labels of `image` (blocking); a missing image is an `ImageNotFoundError`."""
    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound as exc:
        raise ImageNotFoundError(
            f"image {image!r} does not exist here; build it with `conductor images build`"
        ) from exc
    return dict(found.labels or {})


def _exec_user(limits: ContainerLimits) -> str:
    """The user commands run as: `user`, root when the keepalive has a user of its own, else
    the container's own ("")."""
    if limits.keepalive_user is None:
        return ""
    return limits.user or "0:0"


def _keepalive_command(ttl_s: float) -> list[str]:
    """PID 1: sleeps in steps until `ttl_s` has passed; `wait` also reaps reparented orphans."""
    steps = max(1, math.ceil(ttl_s / _KEEPALIVE_STEP_S))
    script = f"i=0; while [ $i -lt {steps} ]; do sleep {_KEEPALIVE_STEP_S} & wait; i=$((i+1)); done"
    return ["sh", "-c", script]


def new_container_name() -> str:
    """A unique container name of this project."""
    return f"aio-conductor-{secrets.token_hex(8)}"


async def remove_container_named(client: docker.DockerClient, name: str) -> bool:
    """Remove the container called `name` if it exists.

    Returns:
        True when it is gone; False when the daemon cannot remove it yet (409 Conflict: right
        after a restart a container can still be in creation, removal or restart), so the
        caller should try again later.

    Raises:
        DockerUnavailableError: the daemon did not answer.
        SandboxError: the daemon refused for another reason.
    """
    try:
        outcome = await docker_call(remove_container_blocking, client, name)
    except docker.errors.APIError as exc:
        raise SandboxError(f"could not remove container {name}: {exc.explanation}") from exc
    return outcome is not RemovalOutcome.BUSY


_QUOTA_SUPPORT: dict[str, bool] = {}
"""Per daemon URL: whether it took `--storage-opt size` (asked once per process, not per start)."""


def _daemon_key(client: docker.DockerClient) -> str:
    return str(client.api.base_url)


def storage_quota_supported(client: docker.DockerClient) -> bool | None:
    """Whether this daemon's storage driver took a disk quota; None until a start asked it."""
    return _QUOTA_SUPPORT.get(_daemon_key(client))


def _refuses_storage_quota(exc: docker.errors.APIError) -> bool:
    """Whether the daemon rejected the container for its `--storage-opt` (e.g. "--storage-opt
    is supported only for overlay over xfs with 'pquota' mount option")."""
    message = str(exc.explanation or exc).lower()
    return "storage-opt" in message or "storage opt" in message or "storage_opt" in message


def _fsize_blocks(limits: ContainerLimits) -> int:
    """RLIMIT_FSIZE in bytes (Docker passes it to setrlimit as is)."""
    return limits.max_file_mb * 1024 * 1024


def _run_container(
    client: docker.DockerClient,
    image: str,
    workdir: str,
    limits: ContainerLimits,
    labels: dict[str, str],
    name: str | None = None,
) -> Container:
    options: dict[str, Any] = {
        "command": _keepalive_command(limits.ttl_s),
        "detach": True,
        "working_dir": workdir,
        "labels": labels,
        "mem_limit": f"{limits.memory_mb}m",
        "memswap_limit": f"{limits.memory_mb}m",
        "nano_cpus": int(limits.cpus * 1e9),
        "pids_limit": limits.pids,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "tmpfs": {mount: f"rw,size={limits.tmpfs_mb}m" for mount in _TMPFS_MOUNTS},
        "ulimits": [
            Ulimit(name="fsize", soft=_fsize_blocks(limits), hard=_fsize_blocks(limits)),
            Ulimit(name="nofile", soft=limits.max_open_files, hard=limits.max_open_files),
        ],
    }
    if not limits.network:
        options["network_mode"] = "none"
    if limits.runtime is not None:
        options["runtime"] = limits.runtime
    if limits.init:
        options["init"] = True
    if limits.keepalive_user is not None:
        options["user"] = limits.keepalive_user  # commands run as `user` (`_exec_user`)
    elif limits.user is not None:
        options["user"] = limits.user
    if limits.read_only_root:
        options["read_only"] = True
        # Writable volumes seeded from the image (Docker copies what the image has there);
        # anonymous, so `remove(v=True)` deletes them with the container.
        options["mounts"] = [Mount(target=path, source=None) for path in (workdir, "/var/tmp")]
    if limits.disk_mb is not None and storage_quota_supported(client) is not False:
        options["storage_opt"] = {"size": f"{limits.disk_mb}M"}
    try:
        try:
            container = client.containers.run(image, name=name, **options)
        except docker.errors.APIError as exc:
            if "storage_opt" not in options or not _refuses_storage_quota(exc):
                raise
            _QUOTA_SUPPORT[_daemon_key(client)] = False
            log.info(
                "this Docker storage driver offers no disk quota (%s); containers start without "
                "one and max_file_mb caps each file instead",
                exc.explanation,
            )
            del options["storage_opt"]
            return client.containers.run(image, name=name, **options)
        if "storage_opt" in options:
            _QUOTA_SUPPORT[_daemon_key(client)] = True
        return container
    except docker.errors.ImageNotFound as exc:
        raise ImageNotFoundError(
            f"image {image!r} does not exist here; build it with `conductor images build`"
        ) from exc
    except docker.errors.APIError as exc:
        if name is not None:  # created but not started (or removed meanwhile): leave nothing
            with contextlib.suppress(docker.errors.DockerException, *_TRANSPORT_ERRORS):
                remove_container_blocking(client, name)
        raise SandboxError(
            f"could not start a container from {image!r}: {exc.explanation}"
        ) from exc


@dataclass(frozen=True, slots=True)
class _FileOwner:
    """Mode and owner a written file gets."""

    mode: int
    uid: int
    gid: int


def _single_file_tar(name: str, content: bytes, owner: _FileOwner) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(content)
        info.mode = owner.mode
        info.uid, info.gid = owner.uid, owner.gid
        info.mtime = int(time.time())
        archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()
