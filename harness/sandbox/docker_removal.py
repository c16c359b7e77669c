"""Removing a container that other processes may be removing too: every answer is a state.

Several runs share one daemon; their reapers, their pools and `conductor envs reap` can all
reach for the same container. "No such container" (404) means it is gone; 409 means the
daemon is already removing it (or, right after a daemon restart, still busy with it). Neither
is an error of the caller: the outcome says which state the container is in.
"""

from __future__ import annotations

from enum import Enum

import docker
import docker.errors

__all__ = ["RemovalOutcome", "remove_container_blocking"]


class RemovalOutcome(Enum):
    """What a removal found."""

    REMOVED = "removed"  # this call removed it
    GONE = "gone"  # it did not exist (any more): someone else removed it
    BUSY = "busy"  # 409: its removal is in progress elsewhere, or the daemon is busy with it


def remove_container_blocking(client: docker.DockerClient, container: str) -> RemovalOutcome:
    """Force-remove `container` (id or name) and its anonymous volumes (blocking: call it from
    a worker thread).

    Raises:
        docker.errors.APIError: any other refusal (a 500, a permission problem).
        requests / urllib3 errors: the daemon did not answer (see `docker_call`).
    """
    try:
        client.api.remove_container(container, force=True, v=True)
    except docker.errors.NotFound:
        return RemovalOutcome.GONE
    except docker.errors.APIError as exc:
        if exc.status_code == 409:
            return RemovalOutcome.BUSY
        raise
    return RemovalOutcome.REMOVED
