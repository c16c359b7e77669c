"""The Docker labels that mark a container as ours, and who owns it (for the reaper)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LABEL_PREFIX", "MANAGED_LABEL", "ContainerOwner", "owner_labels", "parse_owner"]

LABEL_PREFIX = "aio-conductor"
MANAGED_LABEL = f"{LABEL_PREFIX}.managed"
_PID = f"{LABEL_PREFIX}.owner-pid"
_HOST = f"{LABEL_PREFIX}.owner-host"
_CREATED = f"{LABEL_PREFIX}.created-at"
_TTL = f"{LABEL_PREFIX}.ttl-s"
_ROLE = f"{LABEL_PREFIX}.role"


@dataclass(frozen=True, slots=True)
class ContainerOwner:
    """Who made a container, when (Unix seconds) and for how long it may live."""

    pid: int
    host: str
    created_at_s: float
    ttl_s: float


def owner_labels(created_at_s: float, ttl_s: float, role: str = "sandbox") -> dict[str, str]:
    """Labels for a container this process creates now."""
    return {
        MANAGED_LABEL: "1",
        _PID: str(os.getpid()),
        _HOST: socket.gethostname(),
        _CREATED: f"{created_at_s:.3f}",
        _TTL: f"{ttl_s:.0f}",
        _ROLE: role,
    }


def parse_owner(labels: Mapping[str, str]) -> ContainerOwner | None:
    """The owner recorded in `labels`, or None if the labels are not ours or are damaged."""
    if labels.get(MANAGED_LABEL) != "1":
        return None
    try:
        return ContainerOwner(
            pid=int(labels[_PID]),
            host=labels[_HOST],
            created_at_s=float(labels[_CREATED]),
            ttl_s=float(labels[_TTL]),
        )
    except (KeyError, ValueError):
        return None
