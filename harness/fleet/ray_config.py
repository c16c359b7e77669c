"""`RayPoolConfig`: how env workers run on a Ray cluster; and the one place Ray is imported.

Ray is an optional extra: nothing imports it at module level, and `require_ray` says how to
install it when it is missing.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pydantic import Field, ValidationError, field_validator

from foundation.config import FrozenConfig
from foundation.errors import ConfigError
from harness.pool import PoolConfig

__all__ = ["RAY_EXTRA_HINT", "RayPoolConfig", "require_ray"]

RAY_EXTRA_HINT = "install the ray extra: pip install 'aio-conductor[ray]'"


def require_ray() -> ModuleType:
    """The `ray` module.

    Raises:
        ConfigError: Ray is not installed; the message says how to install it.
    """
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"Ray env workers need Ray; {RAY_EXTRA_HINT}") from exc
    return ray


class RayPoolConfig(FrozenConfig):
    """Env workers on Ray: one `EnvWorker` actor per node, each with its node's env pool."""

    address: str | None = Field(
        None,
        description="the cluster to join when this process is not connected yet (it is used "
        "as is when it is): `auto` = the running cluster (RAY_ADDRESS, else the one started "
        "on this machine), failing if there is none; None = the same, else start a local one; "
        "or host:port / ray://host:port",
    )
    namespace: str | None = Field(None, description="Ray namespace of the connection (None: Ray's)")
    node_resource: str | None = Field(
        None,
        description="only nodes that have this custom resource get a worker (e.g. `docker`, "
        "given with `ray start --resources='{\"docker\": 1}'` on nodes that have Docker); "
        "None = every alive node",
    )
    actor_num_cpus: float = Field(
        1.0, ge=0, description="CPUs each worker actor reserves on its node (Ray resources)"
    )
    actor_resources: dict[str, float] = Field(
        default_factory=dict, description="custom Ray resources each worker actor reserves"
    )
    per_node: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="pool settings per node, by Ray node id or node IP address, over the "
        "pool's own (e.g. {'10.0.0.3': {max_live: 64, act_slots: 16}})",
    )
    max_concurrency: int = Field(
        1000, ge=1, description="calls one worker actor serves at once (steps in flight + control)"
    )
    start_timeout_s: float = Field(
        120.0, gt=0, description="wait for a worker to be placed and its pool started (s)"
    )
    call_timeout_s: float = Field(
        60.0, gt=0, description="wait for a control call: acquire, reset, release, stats (s)"
    )
    step_timeout_s: float = Field(
        0.0,
        ge=0,
        description="wait for one step's reply beyond which the episode ends with an infra "
        "error; 0 = no limit (the env's own command timeouts apply, and Ray reports a dead "
        "node) (s)",
    )
    close_timeout_s: float = Field(
        60.0, gt=0, description="wait for a worker to destroy its sandboxes at close (s)"
    )
    refresh_s: float = Field(
        1.0, gt=0, description="how often the conductor refreshes a worker's warm counts (s)"
    )
    clock_window: int = Field(
        32, ge=1, description="recent round trips the worker clock offset is chosen from"
    )
    reap_timeout_s: float = Field(
        60.0, gt=0, description="wait for the removal of a dead worker's containers (s)"
    )
    reap_settle_s: float = Field(
        2.0,
        ge=0,
        description="delay of a second removal pass after a worker died, for containers whose "
        "creation the daemon finished after the death (s)",
    )

    @field_validator("per_node")
    @classmethod
    def _overrides_are_pool_settings(cls, per_node: dict[str, dict[str, Any]]) -> Any:
        for node, override in per_node.items():
            try:
                PoolConfig.model_validate(override)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                    for error in exc.errors()
                )
                raise ValueError(
                    f"per_node[{node!r}] is not a valid pool setting ({problems}); use pool "
                    "fields such as max_live, act_slots, warm_per_image"
                ) from exc
        return per_node
