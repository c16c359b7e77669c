"""Env pools on several Docker hosts or Ray nodes, seen by the rollout layer as one pool.

* `protocol`: `LeasePool` and `Lease`, what the rollout layer needs of a pool and of a lease
  (an `EnvPool` and its `EnvLease` are one; a `PoolFleet` is another).
* `placement`: pure decisions: which member takes a lease, which one warms an image.
* `pool_fleet`: `PoolFleet`, one pool over several members, with failover when one is gone.
"""

from harness.fleet.placement import MemberLoad, choose_home, choose_member
from harness.fleet.pool_fleet import FleetMember, PoolFleet
from harness.fleet.protocol import Lease, LeasePool

__all__ = [
    "FleetMember",
    "Lease",
    "LeasePool",
    "MemberLoad",
    "PoolFleet",
    "choose_home",
    "choose_member",
]
