"""Env pools on several Docker hosts or Ray nodes, seen by the rollout layer as one pool.

* `protocol`: `LeasePool` and `Lease`, what the rollout layer needs of a pool and of a lease
  (an `EnvPool` and its `EnvLease` are one; a `PoolFleet` is another).
* `placement`: pure decisions: which member takes a lease, which one warms an image.
* `pool_fleet`: `PoolFleet`, one pool over several members, with failover when one is gone.
* `ray_workers`: `ray_fleet`, one `EnvWorker` actor per Ray node as a `PoolFleet` (the `ray`
  extra; these modules import Ray only when a fleet starts): `ray_config` (`RayPoolConfig`),
  `ray_worker` (the actor), `ray_member` (its conductor-side proxy), `ray_clock` (the worker
  clock's offset).
"""

from harness.fleet.placement import MemberLoad, choose_home, choose_member
from harness.fleet.pool_fleet import FleetMember, PoolFleet
from harness.fleet.protocol import Lease, LeasePool
from harness.fleet.ray_clock import ClockOffset, ClockSample
from harness.fleet.ray_config import RayPoolConfig
from harness.fleet.ray_member import RayLease, RayNode, RayPoolMember
from harness.fleet.ray_worker import EnvWorker
from harness.fleet.ray_workers import RayFleet, ray_fleet

__all__ = [
    "ClockOffset",
    "ClockSample",
    "EnvWorker",
    "FleetMember",
    "Lease",
    "LeasePool",
    "MemberLoad",
    "PoolFleet",
    "RayFleet",
    "RayLease",
    "RayNode",
    "RayPoolConfig",
    "RayPoolMember",
    "choose_home",
    "choose_member",
    "ray_fleet",
]
