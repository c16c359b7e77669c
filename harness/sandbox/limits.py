"""Limits every sandbox enforces on commands and containers (one config for both backends)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, model_validator

from foundation.config import FrozenConfig

__all__ = ["AGENT_USER_LABEL", "AUTO_USER", "ContainerLimits", "ExecLimits", "resolve_user"]


AUTO_USER = "auto"
"""`ContainerLimits.user`: the image's agent user when it names one, else root."""
AGENT_USER_LABEL = "aio-conductor.agent-user"
"""An image label naming the `uid:gid` its workdir belongs to (set by the SWE task image build)."""


def resolve_user(user: str | None, image_labels: Mapping[str, str] | None) -> str | None:
    """The user commands run as: `user`, or for `auto` the image's agent user (None: root)."""
    if user != AUTO_USER:
        return user
    return (image_labels or {}).get(AGENT_USER_LABEL) or None


class ExecLimits(FrozenConfig):
    """How a single command is bounded."""

    kill_grace_s: float = Field(
        5.0, gt=0, description="seconds between SIGTERM and SIGKILL at a timeout (`timeout -k`)"
    )
    host_grace_s: float = Field(
        5.0,
        gt=0,
        description="extra seconds the host waits past timeout+kill_grace before it gives up on "
        "the command (the in-sandbox `timeout` normally fires first; a host-side timeout alone "
        "would leave the process running, see reference/swe-envs.md §7)",
    )
    file_op_timeout_s: float = Field(
        30.0,
        gt=0,
        description="seconds a file write may spend preparing its target (creating the parent "
        "directory, reading the mode and owner it keeps)",
    )
    output_head_bytes: int = Field(16_384, ge=0, description="bytes kept from the start of output")
    output_tail_bytes: int = Field(16_384, ge=0, description="bytes kept from the end of output")
    max_output_mb: float = Field(
        64.0,
        ge=0,
        description="a command that prints more than this is killed there (its output so far "
        "is kept head+tail, with a note): the host stops reading at the source instead of "
        "draining gigabytes until the timeout. 0: never (MiB)",
    )

    @property
    def max_output_bytes(self) -> int:
        return int(self.max_output_mb * 2**20)


class ContainerLimits(FrozenConfig):
    """Resource limits of a Docker sandbox (see reference/swe-envs.md §5)."""

    memory_mb: int = Field(2048, ge=16, description="memory limit, swap included (MiB)")
    cpus: float = Field(1.0, gt=0, description="CPU quota in cores")
    pids: int = Field(256, ge=8, description="max processes/threads (stops fork bombs)")
    tmpfs_mb: int = Field(256, ge=1, description="size of the tmpfs mounted on /tmp (MiB)")
    network: bool = Field(False, description="allow network access (off: `--network none`)")
    max_file_mb: int = Field(
        2048,
        ge=1,
        description="largest file any process may write (`ulimit -f`, which binds root too; a "
        "write past it fails with EFBIG): the per-command disk cap where the storage driver "
        "offers no quota. Costs nothing; lower it for untrusted code on small disks (MiB)",
    )
    disk_mb: int | None = Field(
        10_240,
        ge=16,
        description="size of the container's writable layer (`--storage-opt size`), where the "
        "storage driver offers it (overlay2 on xfs mounted with pquota, btrfs, zfs, "
        "devicemapper); elsewhere the daemon refuses it, the container starts without it (logged "
        "once) and `max_file_mb` caps each file instead. Costs nothing where it applies; None: "
        "never ask (MiB)",
    )
    user: str | None = Field(
        AUTO_USER,
        description="run every command as this user (`uid:gid`, or a name the image knows) "
        "instead of root (with every capability dropped). `auto`: the user the image names "
        f"in its `{AGENT_USER_LABEL}` label (SWE task images built with `images.agent_uid`, "
        "which `conductor run` sets to `auto_uid`), else root; None: root. The workdir must "
        "be writable by the user; the file tools then read and write only what it may, "
        "which costs one check per file read",
    )
    auto_uid: int = Field(
        1000,
        ge=1,
        description="with `user: auto`, the uid (and gid) `conductor run` hands the workdir of "
        "the task images it builds to, so that their commands run as it",
    )
    init: bool = Field(
        True,
        description="run docker-init (tini) as PID 1 (`docker run --init`): it reaps orphaned "
        "processes and forwards signals to the keepalive loop under it",
    )
    keepalive_user: str | None = Field(
        "65534:65534",
        description="the user of PID 1 and of the keepalive loop that keeps the container up "
        "(nobody). Commands run as `user` (root when unset) and, with every capability "
        "dropped (no CAP_KILL), cannot signal another user's processes: `kill -9 -1` ends the "
        "agent's own processes, never the container. None: PID 1 runs as `user` (the image's "
        "user when unset), and with `init` a `kill -9 -1` by that user stops the container",
    )
    read_only_root: bool = Field(
        False,
        description="mount the root filesystem read-only: the agent cannot change the system "
        "(pip install, /etc, /usr). Writable: /tmp (tmpfs), and the workdir and /var/tmp, as "
        "volumes seeded from the image and removed with the container; the seeding copies the "
        "workdir at every start",
    )
    runtime: str | None = Field(
        None,
        description="OCI runtime of the containers, e.g. `runsc` (gVisor) where it is installed "
        "and registered with the daemon: a user-space kernel between the agent's commands and "
        "the host, for about 2x slower syscalls; None: the daemon's default (runc)",
    )
    max_open_files: int = Field(
        4096, ge=64, description="open file descriptors per process (`ulimit -n`)"
    )
    ttl_s: int = Field(
        6 * 3600,
        ge=60,
        description="a container older than this is removed by the reaper, owner alive or not",
    )

    @model_validator(mode="after")
    def _keepalive_apart_from_commands(self) -> ContainerLimits:
        commands = self.user if self.user not in (None, AUTO_USER) else "0:0"
        if self.keepalive_user is not None and self.keepalive_user in (commands, "root", "0"):
            raise ValueError(
                f"keepalive_user {self.keepalive_user!r} is the user commands run as "
                f"({commands!r}): a command could then kill the keepalive loop and the "
                "container with it; choose another user (65534:65534 is nobody), or null"
            )
        return self
