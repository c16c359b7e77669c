"""The reaper: removes containers of this project whose owner process is gone or whose TTL passed.

A crashed rollout leaves containers behind; the next pool start (or `conductor envs reap`)
removes them. The decision is a pure function; `reap_containers` does the Docker I/O.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import docker

from harness.sandbox.docker_removal import RemovalOutcome, remove_container_blocking
from harness.sandbox.labels import MANAGED_LABEL, ContainerOwner, parse_owner

__all__ = ["ReapReport", "pid_alive", "reap_containers", "should_reap"]


def should_reap(
    owner: ContainerOwner | None,
    *,
    now_s: float,
    this_host: str,
    owner_alive: Callable[[int], bool],
    remove_all: bool = False,
) -> str | None:
    """Why a labelled container should go, or None to keep it.

    A container owned by a live process on this host stays until its TTL; one whose owner is on
    another host is judged only by its TTL (we cannot see that host's processes).
    """
    if owner is None:
        return "labels damaged"
    if remove_all:
        return "removal of all project containers requested"
    if now_s > owner.created_at_s + owner.ttl_s:
        return f"older than its TTL of {owner.ttl_s:.0f} s"
    if owner.host == this_host and not owner_alive(owner.pid):
        return f"owner process {owner.pid} is gone"
    return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class ReapReport:
    removed: tuple[tuple[str, str], ...]  # (container id, reason)
    kept: int


def reap_containers(
    client: docker.DockerClient,
    *,
    remove_all: bool = False,
    wall_time: Callable[[], float] = time.time,
    owner_alive: Callable[[int], bool] = pid_alive,
) -> ReapReport:
    """Remove every project container that `should_reap` condemns; returns what it did.

    Other processes create and remove project containers at the same time (other runs, their
    reapers), so the listing is used as it came: its records carry the labels, and no
    container is inspected after it (issue 28: a container removed between the list and an
    inspect ended a run with "No such container"). A container that is gone, or whose removal
    another process has begun, counts as removed by someone else, never as an error.
    """
    removed: list[tuple[str, str]] = []
    kept = 0
    this_host = socket.gethostname()
    now_s = wall_time()
    for record in client.api.containers(all=True, filters={"label": f"{MANAGED_LABEL}=1"}):
        reason = should_reap(
            parse_owner(record.get("Labels") or {}),
            now_s=now_s,
            this_host=this_host,
            owner_alive=owner_alive,
            remove_all=remove_all,
        )
        if reason is None:
            kept += 1
            continue
        container_id = str(record["Id"])
        if remove_container_blocking(client, container_id) is RemovalOutcome.REMOVED:
            removed.append((container_id, reason))
    return ReapReport(removed=tuple(removed), kept=kept)
