"""A real local Ray cluster for tests: a head and more node processes (separate raylets) on this
machine, through Ray's own test utilities; afterwards no Ray process of it is left."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest

__all__ = ["LocalRayCluster", "local_ray_cluster"]

RAY_MISSING = "Ray is not installed: pip install 'aio-conductor[ray]'"
# A dead node is noticed within about a second (Ray's default health check takes ~30 s).
QUICK_HEALTH_CHECK = {"health_check_period_ms": 300, "health_check_failure_threshold": 3}


@dataclass(slots=True)
class LocalRayCluster:
    ray: ModuleType
    cluster: Any  # ray.cluster_utils.Cluster
    nodes: list[Any]  # the node processes added to the head


@contextmanager
def local_ray_cluster(extra_nodes: int = 1) -> Iterator[LocalRayCluster]:
    """Start the cluster and connect this process to it (skips if Ray is not installed)."""
    ray = pytest.importorskip(
        "ray", reason="Ray is not installed: pip install 'aio-conductor[ray]'"
    )
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "_system_config": QUICK_HEALTH_CHECK,
        },
    )
    nodes = [cluster.add_node(num_cpus=1) for _ in range(extra_nodes)]
    cluster.wait_for_nodes()
    processes = [
        info.process
        for node in cluster.list_all_nodes()
        for infos in node.all_processes.values()
        for info in infos
    ]
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield LocalRayCluster(ray, cluster, nodes)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert all(process.poll() is not None for process in processes), "a Ray process is left"
