"""Registers the shipped envs with Gymnasium's registry and resolves env ids helpfully.

Gymnasium keeps one process-wide registry; we touch it only when `register_envs()` is called
(never at import time). After that, `gymnasium.make("conductor/Example-v0")` works.
"""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium
import gymnasium.error

from harness.errors import EnvNotFoundError

__all__ = ["SHIPPED_ENVS", "make_env", "register_envs"]

NAMESPACE = "conductor"

# id -> entry point. Each entry point accepts keyword arguments only.
SHIPPED_ENVS: dict[str, str] = {
    f"{NAMESPACE}/Example-v0": "envs.example.env:FileCheckEnv",
    f"{NAMESPACE}/SWE-v0": "envs.swe.env:make_swe_env",
}


def register_envs() -> list[str]:
    """Register every shipped env with Gymnasium (idempotent); returns their ids."""
    for env_id, entry_point in SHIPPED_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point, nondeterministic=True)
    return list(SHIPPED_ENVS)


def make_env(env_id: str, **kwargs: Any) -> gymnasium.Env[Any, Any]:
    """`gymnasium.make` for our ids, with a suggestion when the id is wrong."""
    register_envs()
    if env_id not in gymnasium.registry:
        known = sorted(key for key in gymnasium.registry if key.startswith(f"{NAMESPACE}/"))
        close = difflib.get_close_matches(env_id, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise EnvNotFoundError(
            f"no env is registered as {env_id!r}.{hint} Registered: {', '.join(known)}"
        )
    try:
        return gymnasium.make(env_id, **kwargs)
    except gymnasium.error.Error as exc:
        raise EnvNotFoundError(f"could not make {env_id!r}: {exc}") from exc
